"""A job (cluster + workload + training settings) resolved to the plain numbers the step model needs,
and a grid of candidate strategies as numpy arrays (one element per candidate).

The split keeps the hot path free of spec objects: specs are read once into a :class:`Job`, and the
planner builds a :class:`StrategyGrid` of millions of candidates without touching spec objects.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cached_property
from typing import Any

import msgspec
import numpy as np
from msgspec.structs import replace

from scalemodel.choices import (
    ROWWISE_FP8_RECIPES,
    TE_FP8_RECIPES_TEXT,
    TORCHTITAN_LAYERS,
    Algorithm,
    Assignment,
    Compression,
    CompressionKind,
    CpCommType,
    DpComm,
    FlexBackend,
    LayerImpl,
    Layout,
    LossImpl,
    Precision,
    Recompute,
    RecomputeMethod,
    Schedule,
    ScheduleKind,
    StateOffload,
    SyncKind,
    Zero,
    parse_compression,
    parse_dp_comm,
    parse_schedule,
    parse_sequence_lengths,
    parse_sync,
)
from scalemodel.cost import balance, compute, efficiency, mamba, memory, moe_routing, nccl, staleness, transformer
from scalemodel.cost.network import Network
from scalemodel.cost.placement import place
from scalemodel.engine.divisors import divisors
from scalemodel.engine.intervals import Calibration, calibration_of
from scalemodel.engine.network import build_network
from scalemodel.errors import InputError, Origin, sub_path
from scalemodel.specs import notices
from scalemodel.specs import workload as workload_specs
from scalemodel.specs.accelerator import cudnn_release_key
from scalemodel.specs.cluster import cv_refusal
from scalemodel.specs.training import (
    OFFLOAD_TENSORS,
    TP_COMM_PARTS,
    bf16_layer_share,
    check_attention_kernel,
    cudnn_release_curves,
    cudnn_release_held,
    learned_positions_fit,
    low_precision_recipe,
    module_precisions,
    proj_original_input_recipes,
    xla_later_partitioner,
)

#: PyTorch DDP's default gradient bucket: ``bucket_cap_mb=25``, which DDP reads in MiB,
#: ``self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)`` (pytorch/pytorch@25562d3d41
#: torch/nn/parallel/distributed.py, ``DistributedDataParallel.__init__``): 26,214,400 bytes, not 25e6 (25e6 until a
#: review). DDP's separate 1 MiB first bucket (``dist._DEFAULT_FIRST_BUCKET_BYTES``, same file) is not modelled.
DDP_BUCKET_BYTES = 25.0 * 1024 * 1024
#: DeepSpeed ZeRO's reduce_bucket_size default, 5e8 elements (DeepSpeed config-json docs).
DEEPSPEED_BUCKET_ELEMENTS = 5e8


class Job(msgspec.Struct, frozen=True, dict=True):
    """Everything about the job that does not vary across candidate strategies (SI units).

    A msgspec Struct, not a dataclass: Python 3.11 compiles a frozen dataclass's generated methods from source at
    import, ~27 M instructions for these 70 fields, 3% of a query (a Struct class is built in C); copies with
    changes are :func:`msgspec.structs.replace`, the field names ``__struct_fields__``; ``dict=True`` for the cached
    :attr:`bf16_layer_job` (a replaced copy is built without it)."""

    name: str
    cluster_name: str
    network: Network
    gpus_per_node: int
    max_gpus: int
    accelerator: str
    accelerator_family: str  # AcceleratorSpec.family: the generation validation residuals are matched on
    peak_flops: float  # at the training precision
    memory_bandwidth: float
    memory_capacity: float  # bytes the runtime can allocate: the accelerator's memory less its memory_reserved
    gemm_max: float
    gemm_half_dim: float
    memory_efficiency: float
    precision: str
    elem_bytes: float  # activations and weights in compute
    grad_bytes: float  # gradient element as communicated
    optimizer_bytes_per_param: float
    seq_len: int
    is_transformer: bool
    shape: Any  # scalemodel.cost.transformer.Shape or None
    params: float
    expert_params: float  # routed-expert parameters (sharded by EP)
    generic_flops_per_sample: float  # forward, generic workloads
    generic_backward_factor: float
    generic_activation_bytes: float
    generic_time_per_sample: float  # measured seconds per sample (fwd+bwd), 0 = use the roofline
    price_per_gpu_s: float  # USD per GPU-second, 0 when unknown
    straggler_cv: float
    straggler_dist: str
    train_tokens: float  # 0 = not given
    critical_batch: float  # B_noise in samples, 0 = not given
    work_cv: float  # CV of one micro-batch's compute time (load imbalance)
    inputs: dict[str, Any] = msgspec.field(default_factory=dict)
    #: bytes of a routing probability (training.moe_router_dtype: 4 fp32, 8 fp64); 0: the activations' elem_bytes
    router_bytes: float = 0.0
    #: peak of the router's fp32 / fp64 GEMMs (Transformer Engine's TF32 for fp32, FP64 for fp64;
    #: cost.compute.router_dtype_times); 0 when router_bytes is 0
    router_peak_flops: float = 0.0
    # dedicated parameter servers (docs/model.md#parameter-server): NIC line rate per direction
    # (0 = a GPU node's NIC), DRAM bandwidth, BytePS partition size, shard imbalance (0 = round-robin)
    ps_server_nic_bandwidth: float = 0.0
    ps_server_memory_bandwidth: float = 204.8e9
    ps_partition_bytes: float = 4096000.0
    ps_shard_imbalance: float = 0.0
    # share of the compute units a running collective occupies (collective_units / compute_units; 0 when
    # the accelerator does not say): overlapped compute runs on the rest (docs/model.md#contention). NCCL runs
    # every ring / tree / p2p collective on its ring channels, NVLS on too (ncclTopoPostset raises nChannels to
    # the NVLS count, never lowers it); only an NVLS all-reduce runs on the NVLS channels: collective_share_nvls
    # (collective_units_nvls / compute_units where the NVLink tier runs NVLS, else collective_share)
    collective_share: float = 0.0
    collective_share_nvls: float = 0.0
    compute_units: int = 0  # SMs / CUs on the chip (AcceleratorSpec.compute_units; 0 when not given)
    # CV of the chip's compute rate over time at its power limit (AcceleratorSpec.clock_jitter_cv; 0: not priced):
    # the lock-stepped GPUs' wait for the slowest of them (docs/model.md#jitter)
    clock_jitter_cv: float = 0.0
    # staleness penalty of async / stale-sync modes for this optimizer and model family, and its provenance
    # (scalemodel/cost/staleness.py); --staleness-kappa overrides it per call
    staleness_kappa: float = msgspec.field(default_factory=staleness.fallback_kappa)
    staleness_kappa_source: str = ""
    critical_batch_source: str = ""  # where critical_batch (B_noise) came from, one line ("" when not known)
    # fixed seconds added to every step (ClusterSpec.step_overhead, docs/model.md#overhead) and the fraction of
    # each compute window communication may hide under (ClusterSpec.overlap_efficiency, #overlap-efficiency)
    step_overhead: float = 0.0
    overlap_efficiency: float = 1.0
    # what `calibrate runs` fitted this cluster to (ClusterSpec.calibration; an overlay from before the residuals
    # were recorded is version 1 with none): the prediction interval's source (engine/intervals.py)
    calibration: Calibration | None = None
    # the attention core's peak and GEMM curve when they differ from the other GEMMs' (an fp8 run's core runs in
    # BF16, cost.compute.layer_compute_time); 0 = the GEMMs' own
    attention_peak_flops: float = 0.0
    attention_gemm_max: float = 0.0
    attention_gemm_half_dim: float = 0.0
    # the output-layer (logits) GEMM's peak and curve when they differ from the other GEMMs' (an fp8 run's logits
    # GEMM runs in BF16: _bf16_gemms); 0 = the GEMMs' own
    logits_peak_flops: float = 0.0
    logits_gemm_max: float = 0.0
    logits_gemm_half_dim: float = 0.0
    # GPU <-> host link per GPU per direction (ClusterSpec.host_bandwidth; 0 = not given): activation offload
    host_bandwidth: float = 0.0
    # host DRAM per node (ClusterSpec.host_memory; 0 = not given): the capacity offload_states' host bytes must fit
    host_memory: float = 0.0
    # a low-precision run's scaling recipe (training.fp8_recipe, default delayed; "nvfp4" for an fp4 run; "" =
    # 16/32-bit; torchao's rowwise / rowwise_with_gw_hp): prices the quantization casts (cost.compute.
    # fp8_quantize_bytes, specs.training.low_precision_recipe) and the row-wise recipes' GEMMs
    # (engine.layer_compute._with_rowwise_gemms)
    fp8_recipe: str = ""
    # the fraction of the fp8 curve's rate this recipe's GEMMs run at (cost.compute.fp8_recipe_gemm_factor: MXFP8's
    # block-scaled GEMMs on Blackwell, NVFP4's 1.810; 1 otherwise), already folded into gemm_max: kept so that an
    # mxfp8 gemm_max can be read back as the fp8 curve's (tests/test_mxfp8_gemm_rate.py; nvfp4's gemm_max is a
    # fraction of the fp4 peak, _nvfp4_gemms, so gemm_max / factor is not the fp8 curve's); no report prints it
    fp8_recipe_gemm_factor: float = 1.0
    # the share of transformer layers a low-precision run keeps in BF16 (training.bf16_layers / layers; 0 = none):
    # their times on the BF16 peak and curve without casts, mixed with the others'
    # (engine.layer_compute._compute_per_microbatch)
    bf16_layer_share: float = 0.0
    # modules whose GEMMs run at another precision than the run's (training.module_precision, validated by
    # specs.training.module_precisions): (module, bf16 | mxfp8) pairs, priced by engine.layer_compute (module_gemm);
    # bf16 modules on the attention_* peak and curve, mxfp8 ones on the mxfp8_* below (docs/model.md#module-precision)
    module_precision: tuple[tuple[str, str], ...] = ()
    # an MXFP8 module's GEMMs in another run (fp4): the fp8 peak, the fp8 curve x FP8_RECIPE_GEMM_FACTORS' mxfp8
    # factor; 0 = no such module
    mxfp8_peak_flops: float = 0.0
    mxfp8_gemm_max: float = 0.0
    mxfp8_gemm_half_dim: float = 0.0
    # the fused attention kernel priced (training.attention_kernel resolved by _attention_kernel; "gemm" = the core on
    # the GEMM curve) and its fitted forward / backward curves (attn_max, seq_half, head_half; None with "gemm")
    attention_kernel: str = "gemm"
    # an fp8 run's attention core in FP8 too (training.fp8_attention): its backward in sliding-window layers works
    # through the causal keys of the whole sequence (cost.compute.layer_compute_time)
    fp8_attention: bool = False
    # the recipes under which Megatron-Core's linear_proj keeps its 16-bit input (training.proj_original_input and
    # megatron_core_release, specs.training.proj_original_input_recipes; priced where the attention block's recipe is
    # one: docs/model.md#proj-original-input)
    proj_original_input: tuple[str, ...] = ()
    # that core's time over the BF16 core's, (forward, backward), measured on this accelerator for the run's recipe
    # and head dim, each at s = cost.compute.FP8_ATTENTION_SEQS (cost.compute.fp8_attention_time_ratios; all 1
    # without fp8_attention or a measurement)
    fp8_attention_ratios: tuple[tuple[float, ...], tuple[float, ...]] = compute.NO_FP8_ATTENTION_RATIOS
    # an fp4 run's output-gradient casts round stochastically (NVFP4BlockScaling's default; False with
    # training.nvfp4_disable stochastic_rounding: cost.compute.stochastic_rounding_cast_factor not applied)
    nvfp4_stochastic_rounding: bool = True
    # an fp4 run's weights take 16 x 16 scale blocks (NVFP4BlockScaling's default; False with training.nvfp4_disable
    # 2d_quantization): NVFP4 parameters (strategy.fp4_param_gather) need them (check_fp4_param_gather)
    nvfp4_2d_quantization: bool = True
    # the measured max / mean routed copies per EP rank (training.moe_rank_imbalance); 0 = not given: the
    # random-routing expected maximum (cost.moe_routing, engine.layer_compute.moe_rank_load)
    moe_rank_imbalance: float = 0.0
    # drop-and-pad dispatch (training.moe_pad_to_capacity): every expert's rows fixed at its capacity, no random spread
    # in cost.compute.expert_padded_rows
    moe_pad_to_capacity: bool = False
    # the routing pattern (training.moe_routing): random, or cyclic (Automodel's FakeBalancedGate:
    # cost.moe_routing.cyclic_part_hits), exactly balanced, no count spread
    moe_routing: str = "random"
    # the run's XLA SPMD partitioner gathers a tensor-parallel attention projection's narrower head-side operand for its
    # weight gradient (training.jax_release from 0.4.29, or unset; specs.training.xla_later_partitioner): priced by
    # engine.model_parallel_comm._xla_head_side_gathers on an XLA program at tensor > 1
    xla_later_partitioner: bool = True
    # the release given (training.jax_release), "" when unset: warned about where no XLA program runs
    # (warn_unpriced_jax_release)
    jax_release: str = ""
    # the format whose dense peak is peak_flops (AcceleratorSpec.peak_format: a V100's bf16 run is on its fp16
    # peak), the denominator predict names for MFU and HFU
    peak_format: str = ""
    attention_fwd: dict[str, float] | None = None
    attention_bwd: dict[str, float] | None = None
    # the fused-kernel settings the run gave, (field, value) (("training.attention_kernel", "fa2"),
    # ("training.cudnn_release", "9.19")): priced only with flash_attention on, so a strategy without it warns that
    # they are not (_warn_unpriced_fields; the field named as notices.field_name writes it where that is raised)
    attention_given: tuple[tuple[str, str], ...] = ()
    # the warning that the run's cuDNN release is priced on another held release's curve, after the field's name
    # (training.cudnn_release), "" when it is not: said only where that curve prices something, flash_attention on
    # (warn_unfused_attention)
    attention_release_note: str = ""

    @cached_property
    def bf16_layer_job(self) -> Job:
        """This job with its layers in BF16: the BF16 peak and 16-bit curve (``attention_*``), no recipe (no casts),
        no FP8 attention, no BF16-layer share. engine.layer_compute prices a BF16 layer of an fp8 run with it
        (training.bf16_layers) and the 16-bit weight-gradient GEMMs of strategy fp8_wgrad false; built once a job, so
        one job's BF16 twin is the same object each time it is asked for (the layer memo,
        layer_compute.shared_layer_pieces, keys on it)."""
        return replace(self, bf16_layer_share=0.0, peak_flops=self.attention_peak_flops,
                       gemm_max=self.attention_gemm_max, gemm_half_dim=self.attention_gemm_half_dim, fp8_recipe="",
                       fp8_recipe_gemm_factor=1.0, fp8_attention=False)


def model_param_counts(sh: Any) -> tuple[float, float]:
    """(parameters trained, routed-expert parameters) of a transformer shape, the :class:`Job`'s ``params`` and
    ``expert_params``: :func:`~scalemodel.cost.transformer.training_param_count` (with the MTP modules: trained, held,
    synchronised) and the routed experts of the MoE layers and of the MTP modules whose block is an MoE layer."""
    params = float(transformer.training_param_count(sh))
    expert = float(transformer.expert_params_per_layer(sh) * (sh.moe_layers + np.where(
        sh.last_layer_moe, sh.mtp_weight_modules, 0.0)))
    return params, expert


def training_checks(cluster: Any, workload: Any, training: Any) -> list[tuple[str, Any]]:
    """The refusals :func:`build_job` makes of a training setting the cluster or the model cannot take, as (TrainingSpec
    field, a call that raises InputError) pairs, for the callers that run them before pricing to name where the field
    was written: precision fp4 off Blackwell (low_precision_recipe), a precision the accelerator has no peak for
    (fp8 on an A100, fp4 without an fp4 peak: AcceleratorSpec.peak), more bf16_layers than layers
    (bf16_layer_share), an attention kernel or a cuDNN release the accelerator holds no curve for
    (check_attention_kernel, cudnn_release_curves), a module_precision module the model lacks or mxfp8 off Blackwell
    (module_precisions). Used by commands.common.check_training_fits (predict, plan, memory, scale, sensitivity) and
    :func:`scenario_training_fits` (check, hardware validate of a scenario), both through
    :func:`run_training_checks`."""
    acc = cluster.accelerator
    transformer_wl = getattr(workload, "kind", "") == "transformer"
    out: list[tuple[str, Any]] = [
        ("precision", lambda: low_precision_recipe(training, acc)),  # first, as build_job: fp4 off Blackwell
        ("precision", lambda: acc.peak(training.precision)),
        ("bf16_layers", lambda: bf16_layer_share(training, workload if transformer_wl else None)),
        ("attention_kernel", lambda: check_attention_kernel(training, acc)),
        ("attention_kernel", lambda: check_attention_precision(training)),
        ("cudnn_release", lambda: cudnn_release_curves(training, acc)),
        ("seq_len", lambda: learned_positions_fit(training, workload))]
    if training.sequence_lengths is not None:  # work_cv given too, HI past seq_len, a generic workload: all were
        # "training.sequence_lengths: ..." to a user who wrote --set training.sequence_lengths or a scenario's field
        seq_len = int(training.seq_len or getattr(workload, "seq_len", 0) or 0)
        out.append(("sequence_lengths", lambda: _work_cv(
            training, transformer_shape(workload) if transformer_wl else None, seq_len)))
    if transformer_wl and training.moe_rank_imbalance is not None:  # above E / k at any ep (the ep's own bound:
        # _check_moe_rank_imbalance, and commands.common.build_specs where the strategy is one)
        sh = transformer_shape(workload)
        out.append(("moe_rank_imbalance", lambda: check_moe_rank_imbalance(
            training.moe_rank_imbalance, float(sh.moe_experts), float(sh.moe_top_k), None)))
    if training.module_precision is not None and training.module_precision.named():
        # the modules the model has come from its Shape (the engine's)
        out.append(("module_precision", lambda: module_precisions(
            training, transformer_shape(workload) if transformer_wl else None, acc)))
    return out


def run_training_checks(cluster: Any, workload: Any, training: Any,
                        located: Callable[[str, InputError], str | None]) -> None:
    """Run :func:`training_checks`; a refusal of field ``key`` is raised again at ``located(key, error)``, the place
    the caller knows the field was written (None: the engine's own location). The one loop of
    commands.common.check_training_fits and :func:`scenario_training_fits`, which differ only in how they name
    that place (errors.sub_path keeps what the engine named below the field)."""
    for key, run in training_checks(cluster, workload, training):
        try:
            run()
        except InputError as exc:
            # the field the engine named, where it is another training field than the check's: low_precision_recipe
            # refuses training.fp8_recipe (mxfp8 off Blackwell, rowwise off Hopper/CDNA3), which was located where
            # the precision was written ("--precision: fp8 recipe mxfp8 needs ...", round 21)
            named = exc.where.removeprefix("training.").split(".")[0] if exc.where.startswith("training.") else ""
            key = named if named and named != key and hasattr(training, named) else key
            where = located(key, exc)
            if where is None or where == exc.where:
                raise
            raise InputError(exc.what, where=where, allowed=exc.allowed) from None


def scenario_training_fits(scenario: Any, source: str, sets: Any = ()) -> None:
    """Run :func:`training_checks` on a scenario before pricing (``check``, and ``hardware validate`` of a scenario,
    which checked the schema only: fp4 on an H100 or a cuDNN release the accelerator does not hold passed validate
    and was refused by check). A refusal names the ``--set`` item that wrote the field, else the scenario file
    (``source``) and the field: "scen.yaml: training.cudnn_release: ..."."""
    def located(key: str, exc: InputError) -> str:
        where = f"training.{key}" + sub_path(exc.where, f"training.{key}")
        if any(str(item).split("=", 1)[0].strip() in (where, f"training.{key}") for item in sets or ()):
            return f"--set {where}"
        return f"{source}: {where}" if source else where

    run_training_checks(scenario.cluster, scenario.model, scenario.training, located)


def transformer_shape(workload: Any) -> Any:
    """The :class:`scalemodel.cost.transformer.Shape` of a TransformerWorkload spec (every field that
    changes parameters, FLOPs, memory or communication)."""
    moe, mla = workload.moe, workload.mla
    return transformer.shape(
        layers=workload.layers, hidden=workload.hidden, heads=workload.heads, vocab=workload.vocab,
        kv_heads=workload.kv_heads, ffn_hidden=workload.ffn_hidden, gated_mlp=workload.gated_mlp,
        tied_embeddings=workload.tied_embeddings, biases=workload.biases,
        norm_biases=workload.norm_biases,
        head_dim=(mla.qk_nope_head_dim + mla.qk_rope_head_dim) if mla else workload.head_dim,
        v_head_dim=mla.v_head_dim if mla else None, q_lora_rank=mla.q_lora_rank if mla else 0,
        kv_lora_rank=mla.kv_lora_rank if mla else 0, qk_rope_head_dim=mla.qk_rope_head_dim if mla else 0,
        position_embeddings=workload.position_embeddings, rotary=workload.rotary is not False,
        parallel_block=workload.parallel_block,
        norms_per_layer=workload.norms_per_layer, sliding_window=workload.sliding_window or 0,
        sliding_window_pattern=workload.sliding_window_pattern, dropout=workload.dropout,
        moe_experts=moe.experts if moe else 0, moe_top_k=moe.top_k if moe else 0,
        moe_ffn_hidden=moe.ffn_hidden if moe else None, moe_shared_experts=moe.shared_experts if moe else 0,
        moe_every=moe.every if moe else 1, moe_first_dense=moe.first_dense if moe else 0,
        mtp_layers=workload.mtp_layers, causal=workload.causal, squared_relu=workload.squared_relu,
        moe_latent=(moe.latent_size or 0) if moe else 0, mtp_shared=workload.mtp_shared,
        mtp_block=(getattr(workload.hybrid, "mtp_pattern", None) or ""), **_hybrid(workload))


def _hybrid(workload: Any) -> dict[str, Any]:
    """The hybrid layer counts and Mamba-2 widths of a workload with a hybrid pattern (cost.mamba), else none."""
    hy = getattr(workload, "hybrid", None)
    if hy is None:
        return {}
    counts = mamba.layer_counts(hy.pattern)
    if not counts.mamba:
        return {"hybrid": counts}
    m = hy.mamba or workload_specs.MambaSpec()
    dims = mamba.mamba_dims(hidden=workload.hidden, head_dim=m.head_dim, state_dim=m.state_dim, groups=m.groups,
                            heads=m.heads, expand=m.expand, conv_kernel=m.conv_kernel, chunk_size=m.chunk_size)
    return {"hybrid": counts, "mamba": dims}


def build_job(cluster: Any, workload: Any, training: Any, *, straggler_cv: float | None = None,
              straggler_dist: str | None = None) -> Job:
    """Resolve validated specs (ClusterSpec, workload, TrainingSpec) into a :class:`Job`."""
    acc = cluster.accelerator
    precision = training.precision
    recipe = low_precision_recipe(training, acc)  # first: an fp4 run off Blackwell is refused for that, not for a peak
    peak = acc.peak(precision)
    if precision in ("bf16", "fp16") and precision not in acc.peak_flops:
        # AcceleratorSpec.peak borrows the other 16-bit format's peak: a V100 run at the default bf16, a format Volta
        # has no arithmetic for, was priced at its fp16 tensor-core peak with the header saying bf16 and no word
        other = "fp16" if precision == "bf16" else "bf16"
        # "the format its spec rates", not "the format it runs": Volta and TPUs have no bf16 / fp16 arithmetic, but
        # Gaudi 3 runs fp16 too (its spec here, like Intel's table, rates bf16 and fp8 only)
        # a measured-runs file (fields written flat) has no --precision: it was told "give --precision fp16 (precision)"
        name = notices.field_name("training.precision")
        give = f"{name}: {other}" if name == "precision" else f"--precision {other} ({name})"
        notices.warn(f"{acc.name} has no {precision} peak (its 16-bit peak is {other}): priced at the {other} peak; "
                     f"give {give}, the 16-bit format its spec rates")
    curve = acc.compute_efficiency or compute.default_efficiency(acc.family if acc.family != "other" else acc.name)
    # the spec's curve may carry a separate fp8 GEMM curve (ComputeEfficiency.gemm); family defaults do not
    gemm_max, gemm_half_dim = (acc.compute_efficiency.gemm(precision) if acc.compute_efficiency is not None
                               else (curve.gemm_max, curve.gemm_half_dim))
    # an mxfp8 run's GEMMs: block-scaled kernels, slower than the per-tensor FP8 ones the fp8 curve was fitted to;
    # an fp4 run's NVFP4 GEMMs: the fp8 curve x the measured NVFP4 / FP8 rate, on the fp4 peak (_nvfp4_gemms)
    recipe_factor = compute.fp8_recipe_gemm_factor(acc.family, recipe)
    if recipe == "nvfp4":
        gemm_max, gemm_half_dim = _nvfp4_gemms(acc, curve, recipe_factor)
    else:
        gemm_max = gemm_max * recipe_factor
    elem = Precision.parse(precision).element_bytes
    # fp8 runs: the attention core and the logits GEMM stay in BF16 (cost.compute.layer_compute_time, _bf16_gemms)
    bf16_peak, bf16_gm, bf16_d0 = _bf16_gemms(acc, precision, curve)
    grad_bytes = training.grad_bytes_per_param or Precision.parse(precision).gradient_bytes
    seq = training.seq_len or getattr(workload, "seq_len", 1) or 1
    if workload.kind == "transformer":
        learned_positions_fit(training, workload)
        sh = transformer_shape(workload)
        params, expert = model_param_counts(sh)
        gen_flops = gen_bwd = gen_act = gen_time = 0.0
    else:
        sh = None
        params = float(workload.params)
        expert = 0.0
        gen_flops = float(workload.flops_per_sample)
        gen_bwd = float(workload.backward_factor)
        gen_act = float(workload.activation_bytes_per_sample or 0.0)
        gen_time = float(getattr(workload, "time_per_sample", None) or 0.0)
    _check_rowwise_workload(recipe, sh, workload)
    var = cluster.variability
    cv = var.cv if straggler_cv is None else straggler_cv
    if not (0.0 <= cv < 10.0):
        raise InputError(f"straggler CV {cv} out of range", where="--straggler-cv", allowed="0 <= cv < 10")
    dist = straggler_dist or var.dist
    if straggler_cv is not None and (why := cv_refusal(dist, cv)) is not None:  # the spec checked its own cv
        raise InputError(f"{why[0]} (cluster {cluster.name}'s variability.dist {dist}, cv {cv:g})",
                         where="--straggler-cv", allowed=why[1])
    network = build_network(cluster)
    return Job(
        name=workload.name, cluster_name=cluster.name, network=network,
        gpus_per_node=cluster.gpus_per_node, max_gpus=cluster.largest_gpus, accelerator=acc.name,
        accelerator_family=acc.family,
        peak_flops=peak, peak_format=acc.peak_format(precision), memory_bandwidth=acc.memory_bandwidth,
        memory_capacity=acc.memory - (acc.memory_reserved or 0.0),  # what CUDA can allocate
        gemm_max=gemm_max, gemm_half_dim=gemm_half_dim, memory_efficiency=curve.memory,
        precision=precision, elem_bytes=elem, grad_bytes=grad_bytes,
        router_bytes={"fp32": 4.0, "fp64": 8.0}.get(str(getattr(training, "moe_router_dtype", None)), 0.0),
        router_peak_flops=_router_peak(acc, training) if expert > 0 else 0.0,
        optimizer_bytes_per_param=training.optimizer_bytes_per_param, seq_len=int(seq),
        is_transformer=sh is not None, shape=sh, params=params, expert_params=expert,
        generic_flops_per_sample=gen_flops, generic_backward_factor=gen_bwd, generic_activation_bytes=gen_act,
        generic_time_per_sample=gen_time,
        price_per_gpu_s=float(cluster.price_per_gpu_hour or 0.0),
        straggler_cv=float(cv), straggler_dist=dist,
        train_tokens=float(training.train_tokens or (training.train_samples or 0) * seq),
        critical_batch=_critical_batch(training, sh, int(seq)),
        work_cv=_work_cv(training, sh, int(seq)),
        ps_server_nic_bandwidth=float(cluster.parameter_server.nic_bandwidth or 0.0),
        ps_server_memory_bandwidth=float(cluster.parameter_server.memory_bandwidth),
        ps_partition_bytes=float(cluster.parameter_server.partition_bytes),
        ps_shard_imbalance=float(cluster.parameter_server.shard_imbalance or 0.0),
        collective_share=collective_share(acc, False),
        collective_share_nvls=collective_share(acc, nccl.nvls_on(network.tiers)),
        compute_units=int(getattr(acc, "compute_units", None) or 0),
        clock_jitter_cv=float(getattr(acc, "clock_jitter_cv", 0.0) or 0.0),
        attention_peak_flops=bf16_peak, attention_gemm_max=bf16_gm, attention_gemm_half_dim=bf16_d0,
        logits_peak_flops=bf16_peak, logits_gemm_max=bf16_gm, logits_gemm_half_dim=bf16_d0,
        **_staleness_kappa(training, workload),
        critical_batch_source=_critical_batch_source(training, sh, int(seq)),
        step_overhead=float(cluster.step_overhead), overlap_efficiency=float(cluster.overlap_efficiency),
        calibration=calibration_of(cluster),
        host_bandwidth=float(cluster.host_bandwidth or 0.0), host_memory=float(cluster.host_memory or 0.0),
        fp8_recipe=recipe, fp8_recipe_gemm_factor=recipe_factor, bf16_layer_share=bf16_layer_share(training, sh),
        **_module_precision(training, sh, acc, curve),
        fp8_attention=bool(getattr(training, "fp8_attention", False)),
        proj_original_input=proj_original_input_recipes(training),
        fp8_attention_ratios=(compute.fp8_attention_time_ratios(acc.name, recipe, float(sh.head_dim))
                              if sh is not None and getattr(training, "fp8_attention", False)
                              else compute.NO_FP8_ATTENTION_RATIOS),
        nvfp4_stochastic_rounding="stochastic_rounding" not in tuple(getattr(training, "nvfp4_disable", ()) or ()),
        nvfp4_2d_quantization="2d_quantization" not in tuple(getattr(training, "nvfp4_disable", ()) or ()),
        moe_rank_imbalance=float(getattr(training, "moe_rank_imbalance", None) or 0.0),
        moe_pad_to_capacity=bool(getattr(training, "moe_pad_to_capacity", False)),
        moe_routing=str(getattr(training, "moe_routing", "random") or "random"),
        xla_later_partitioner=xla_later_partitioner(training),
        jax_release=str(getattr(training, "jax_release", None) or ""),
        **_attention_kernel(training, acc, workload),
    )


#: Kernel ``attention_kernel: auto`` prices per accelerator family: what Transformer Engine's DotProductAttention
#: runs (Megatron-Core's default TE layer spec, NeMo, Megatron-Bridge). Its get_attention_backend
#: (NVIDIA/TransformerEngine@001b736048c5428a3820584041ba61ca91a7c992 transformer_engine/pytorch/attention.py,
#: "Select FusedAttention for performance") drops FlashAttention when both it and FusedAttention's
#: F16_arbitrary_seqlen (cuDNN) sub-backend support the call on compute capability 9.0, "to give FusedAttention
#: preference on Hopper+"; below sm90 FlashAttention (flash-attn 2, the package TE requires) wins. Blackwell: cuDNN
#: too: the same test reads ``device_compute_capability >= (9, 0)`` at TE release_v1.14 (3b2a7b00f), v2.0 (e5cc6c299)
#: and v2.1 (450146ae6), where flash-attn >= 2.7.3 is accepted on sm100 (``_flash_attn_version_required_blackwell``)
#: and loses to cuDNN wherever cuDNN supports the call. Exception, not resolved here (the accelerator does not know
#: the run's TE release): TE <= 2.4 refuses F16_arbitrary_seqlen on sm100 for head dims above 128
#: (common/fused_attn/fused_attn.cpp), so such runs get FlashAttention-2; a case states it with
#: ``attention_kernel: fa2`` (scripts/validate_training.py TE_SM100_CUDNN_HEAD_DIM_MAX). Other families (Volta, AMD,
#: TPU, Gaudi): the GEMM pricing.
AUTO_ATTENTION_KERNEL = {"hopper": "cudnn", "blackwell": "cudnn", "ampere": "fa2"}


def attention_kernel_runs(precision: str) -> bool:
    """Whether a fused attention kernel with a fitted curve (fa2, fa3, cudnn) runs in a run of ``precision``: not in
    a 32-bit (fp32, tf32) or fp64 one. FlashAttention-2 takes fp16 / bf16 only (Dao-AILab/flash-attention README,
    "Datatype fp16 and bf16"), FlashAttention-3 fp16 / bf16 and an fp8 forward (its README), cuDNN's fused attention
    fp16 / bf16 and fp8 (cuDNN frontend docs, "Scaled Dot Product Attention FP16/BF16", "FP8"); Transformer Engine's
    get_attention_backend disables FlashAttention and FusedAttention for any other QKV dtype ("Filter: Data type",
    NVIDIA/TransformerEngine@001b736048c5428a3820584041ba61ca91a7c992 transformer_engine/pytorch/attention.py lines
    361-382) and falls back to its unfused attention. An fp8 / fp4 run's core is BF16: it runs. docs/model.md
    #attention-precision (bias31)."""
    return Precision.parse(precision).element_bytes < 4


def check_attention_precision(training: Any) -> None:
    """A named fused attention kernel (training.attention_kernel not auto or gemm) in a run whose precision no such
    kernel takes (:func:`attention_kernel_runs`) is an input error: it was priced on its 16-bit curve as if
    FlashAttention or cuDNN ran in fp32. ``auto`` prices such a run's core as GEMMs instead (:func:`_attention_kernel`):
    with flash_attention on, a memory-efficient kernel that does take fp32 (PyTorch SDPA's EFFICIENT_ATTENTION:
    ``default_mem_efficient_dtypes`` holds kFloat, aten/src/ATen/native/transformers/cuda/sdp_utils.cpp)."""
    name = str(getattr(training, "attention_kernel", "auto") or "auto")
    precision = str(training.precision)
    if name in ("auto", "gemm") or attention_kernel_runs(precision):
        return
    raise InputError(f"attention kernel {name} with precision {precision}: FlashAttention-2/3 and cuDNN's fused "
                     "attention run fp16 / bf16 (and fp8) only: none runs the core in "
                     f"{precision}", where="training.attention_kernel",
                     allowed=f"attention_kernel auto or gemm with precision {precision} (the core as GEMMs; "
                             f"flash_attention false for an unfused core), or precision bf16 / fp16 with {name}")


def _attention_kernel(training: Any, acc: Any, workload: Any = None) -> dict[str, Any]:
    """Job fields of the fused attention kernel (training.attention_kernel): the resolved name and its fitted curves
    from the accelerator's ``attention_efficiency``. ``auto`` takes :data:`AUTO_ATTENTION_KERNEL` where the
    accelerator has a curve for it, else the GEMM pricing; a named kernel without a curve is an input error. A named
    kernel or cuDNN release on a generic workload (no attention core to price) is warned about, as is one on a
    strategy without flash_attention (``attention_given``, :func:`_warn_unpriced_fields`)."""
    name = str(getattr(training, "attention_kernel", "auto") or "auto")
    given = tuple((f"training.{k}", str(v)) for k, v in (("attention_kernel", name if name != "auto" else None),
                                                         ("cudnn_release", getattr(training, "cudnn_release", None)))
                  if v is not None)
    if workload is not None and getattr(workload, "kind", "transformer") != "transformer":
        cudnn_release_curves(training, acc)  # a release the accelerator does not hold is refused all the same
        for path, v in given:
            _warn_field(path, f" = {v} is not priced: {workload.name} is a generic workload (no attention core)")
        return {"attention_kernel": "gemm"}
    curves = acc.attention_efficiency or {}
    if name == "auto":
        # a 32-bit run: no fitted (16-bit) kernel runs its core (attention_kernel_runs), the GEMM pricing does
        name = AUTO_ATTENTION_KERNEL.get(acc.family, "gemm") if attention_kernel_runs(training.precision) else "gemm"
        if name not in curves:
            name = "gemm"
    else:
        check_attention_kernel(training, acc)
        check_attention_precision(training)
    release = cudnn_release_curves(training, acc)
    if release and name != "cudnn":
        _warn_field("training.cudnn_release",
                    f" = {training.cudnn_release} is not priced: the attention kernel is {name} "
                    "(only the cudnn kernel takes a release's curve)")
    if name == "gemm":
        return {"attention_kernel": "gemm", "attention_given": given}
    c = release["cudnn"] if release and name == "cudnn" else curves[name]
    note = ""
    if release and name == "cudnn":
        held = cudnn_release_held(training, acc)
        if held is not None and cudnn_release_key(held) != cudnn_release_key(training.cudnn_release):
            # a release the accelerator holds no sweep of: the nearest earlier one's curve, said aloud where the
            # strategy runs the fused kernel (warn_unfused_attention; without flash_attention it prices nothing)
            note = (f" = {training.cudnn_release}: {acc.name} holds no curve of that release; "
                    f"the cudnn attention core is priced on the {held} curve (the nearest release held at or below "
                    "it)")
    return {"attention_kernel": name, "attention_fwd": _curve_params(c.fwd), "attention_bwd": _curve_params(c.bwd),
            "attention_given": given, "attention_release_note": note}


def _curve_params(curve: Any) -> dict[str, float]:
    """One direction's fitted attention curve as the keywords cost.compute's attention pricing takes."""
    return {"attn_max": float(curve.attn_max), "seq_half": float(curve.seq_half), "head_half": float(curve.head_half)}


def _nvfp4_gemms(acc: Any, curve: Any, factor: float) -> tuple[float, float]:
    """(gemm_max, gemm_half_dim) of an fp4 run's NVFP4 GEMMs, as fractions of the fp4 peak: the accelerator's fp8
    curve (its size dependence, d0) at ``factor`` (cost.compute.FP8_RECIPE_GEMM_FACTORS['blackwell']['nvfp4'],
    1.810) times its rate, gemm_max = fp8 gemm_max x factor x fp8 peak / fp4 peak, so the priced rate is
    factor x the fp8 curve's whatever dense FP4 peak the part carries; capped at 1 (never above the fp4 peak).
    docs/model.md#nvfp4"""
    gm, d0 = (acc.compute_efficiency.gemm("fp8") if acc.compute_efficiency is not None
              else (curve.gemm_max, curve.gemm_half_dim))
    return min(float(gm) * factor * acc.peak("fp8") / acc.peak("fp4"), 1.0), float(d0)


def _module_precision(training: Any, sh: Any, acc: Any, curve: Any) -> dict[str, Any]:
    """Job fields of training.module_precision (specs.training.module_precisions validates it against the model and
    accelerator): the (module, precision) pairs, and for an mxfp8 module the fp8 peak with the fp8 curve's gemm_max
    x the mxfp8 factor (cost.compute.FP8_RECIPE_GEMM_FACTORS, 0.951 on Blackwell) and its gemm_half_dim, as an mxfp8
    run's GEMMs are priced (build_job). A module in BF16 takes the BF16 peak and curve the attention core has."""
    named = module_precisions(training, sh, acc)
    if not named:
        return {}
    recipe = low_precision_recipe(training, acc)
    every_layer_bf16 = bf16_layer_share(training, sh) >= 1.0
    for k, v in named.items():
        if v == recipe:  # an mxfp8 module of an fp8_recipe mxfp8 run: the same GEMMs, casts and bytes as the others
            _warn_field(f"training.module_precision.{k}",
                        f" = {v} is not priced: the run's own recipe is {recipe} "
                        "(the module runs as every other one does)")
        elif every_layer_bf16:
            # Megatron-Core applies a module's override only inside a quantized layer (override_quantized_autocast):
            # a layer of first_last_layers_bf16 stays BF16 whole; the step model prices a BF16 layer share on every
            # piece of the stage, the MTP block's too (engine.layer_compute._compute_per_microbatch), so none is priced
            _warn_field(f"training.module_precision.{k}",
                        f" = {v} is not priced: {notices.field_name('training.bf16_layers')} keeps every layer "
                        "in BF16 (a module's precision applies only inside a quantized layer)")
    out: dict[str, Any] = {"module_precision": tuple(sorted(named.items()))}
    if "mxfp8" in named.values():
        gm, d0 = (acc.compute_efficiency.gemm("fp8") if acc.compute_efficiency is not None
                  else (curve.gemm_max, curve.gemm_half_dim))
        out.update(mxfp8_peak_flops=float(acc.peak("fp8")),
                   mxfp8_gemm_max=min(float(gm) * compute.fp8_recipe_gemm_factor(acc.family, "mxfp8"), 1.0),
                   mxfp8_gemm_half_dim=float(d0))
    return out


def _bf16_gemms(acc: Any, precision: str, curve: Any) -> tuple[float, float, float]:
    """(peak, gemm_max, gemm_half_dim) of the GEMMs that run at another precision than the transformer layers'
    GEMMs: in an fp8 run the BF16 peak and 16-bit curve, else 0s (= the GEMMs' own). They are the attention core
    (Transformer Engine keeps it in BF16 unless fp8_dpa is set) and the output-layer (logits) GEMM.

    Every fp8 recipe the validation runs use leaves the output layer out of FP8:

    - Megatron-Core (and NeMo / Megatron-Bridge on it): ``GPTModel.output_layer`` is a
      ``tensor_parallel.ColumnParallelLinear`` (megatron/core/models/gpt/gpt_model.py), a plain PyTorch matmul
      in the 16-bit compute dtype, not a Transformer Engine module; the FP8 autocast context covers the
      transformer block's layers (megatron/core/transformer/transformer_block.py, megatron/core/fp8_utils.py
      get_fp8_context), and FP8 autocast changes only TE modules' GEMMs.
    - torchtitan (torchao Float8): ``convert_to_float8_training(..., module_filter_fn=lambda mod, fqn:
      fqn != "output")`` (torchtitan float8.py, 2024; 9dec370, 0da8901b1) keeps the output projection in BF16; since
      a6524d8a0 (2025-04-07) only ``[float8] filter_fqns`` does (default none; llama3_8b.toml at e7c0cae lists
      "output", as every torchtitan validation row's run kept it in BF16). A list that does not name it converts it
      to FP8, which is not priced: the TOML importer says so (specs.torchtitan_config, docs/model.md#fp8-casts).

    The word embedding is a table look-up (no GEMM). Transformer layers kept in BF16 by Megatron-Core's
    ``first_last_layers_bf16`` (default False; ``num_layers_at_start_in_bf16`` / ``num_layers_at_end_in_bf16``)
    are training.bf16_layers (Job.bf16_layer_share): Megatron-Bridge's performance recipes switch it off for FP8-CS
    (scripts/performance/utils/precision.py get_precision_config) and its MXFP8 recipe leaves it False.

    An fp4 run likewise: Megatron-Core's get_fp4_context wraps the same TE modules in NVFP4BlockScaling, whose
    ``fp8_dpa`` is False ("Not applying quantization to attention for now", transformer_engine/common/recipe/
    __init__.py at NVIDIA/TransformerEngine@d0067d0da6), so the core and the output layer run in BF16.
    """
    if precision not in ("fp8", "fp4"):
        return 0.0, 0.0, 0.0
    gm, d0 = (acc.compute_efficiency.gemm("bf16") if acc.compute_efficiency is not None
              else (curve.gemm_max, curve.gemm_half_dim))
    return float(acc.peak("bf16")), float(gm), float(d0)


def _router_peak(acc: Any, training: Any) -> float:
    """Peak FLOP/s of the router's GEMMs under ``training.moe_router_dtype`` (cost.compute.router_dtype_times):
    fp32 runs them as TF32 (Transformer Engine's CUBLAS_COMPUTE_32F_FAST_TF32 for fp32 x fp32 GEMMs; the catalog's
    fp32 peak where it lists no tf32, AcceleratorSpec.peak: a GPU without TF32 cores runs them as FP32), fp64 at the
    FP64 peak; 0 when unset. Asked only for a model with routed experts (build_job): a dense or generic model has no
    router, so the setting prices nothing there and is not refused for want of a peak."""
    dtype = getattr(training, "moe_router_dtype", None)
    if dtype not in ("fp32", "fp64"):
        return 0.0
    need = "tf32" if dtype == "fp32" else "fp64"
    try:
        return float(acc.peak(need))
    except InputError:
        peaks = "tf32 (or fp32)" if need == "tf32" else need
        raise InputError(f"moe_router_dtype {dtype} needs the accelerator's {peaks} peak, and {acc.name!r} has none",
                         where="training.moe_router_dtype",
                         allowed=f"bf16 routing (leave it unset), or an accelerator with a {peaks} peak") from None


def _critical_batch_source(training: Any, shape: Any, seq_len: int) -> str:
    """Where :func:`_critical_batch`'s B_noise comes from, for the report."""
    if training.critical_batch is not None:  # the default's unit: a language model's samples are its sequences
        unit = "sequences" if shape is not None else "samples"
        return f"critical batch {training.critical_batch:g} {unit} from training.critical_batch"
    if shape is None:
        return ""
    b = _critical_batch(training, shape, seq_len)
    return (f"critical batch {b:.0f} sequences: the documented default, Kaplan et al. 2020's B_crit(L) at the loss "
            "L(N) of the non-embedding parameter count (a WebText2-era fit, docs/model.md#statistical-efficiency); "
            "give the workload's measured gradient noise scale with --set training.critical_batch=N (scale: "
            "--critical-batch N)")


def _staleness_kappa(training: Any, workload: Any) -> dict[str, Any]:
    """kappa for the workload's optimizer and model family (a transformer, or a generic workload's ``family``:
    cnn, mlp or generic), with its source (scalemodel/cost/staleness.py default_kappa)."""
    family = "transformer" if workload.kind == "transformer" else getattr(workload, "family", "generic")
    d = staleness.default_kappa(training.optimizer, family)
    return {"staleness_kappa": d.kappa, "staleness_kappa_source": d.source}


def _critical_batch(training: Any, shape: Any, seq_len: int) -> float:
    """B_noise in samples: the workload's ``training.critical_batch``, else for a transformer language model
    Kaplan's B_crit at the loss its non-embedding parameter count predicts (docs/model.md#statistical-efficiency),
    else 0 (not known: no statistical efficiency or time to target)."""
    if training.critical_batch is not None:
        return float(training.critical_batch)
    if shape is None:
        return 0.0
    non_embedding = float(transformer.active_param_count(shape) - transformer.embedding_params(shape))
    return float(efficiency.default_critical_batch_tokens(non_embedding)) / seq_len


def _work_cv(training: Any, shape: Any, seq_len: int) -> float:
    """The micro-batch compute CV: ``training.work_cv``, or from ``training.sequence_lengths`` by the
    model's own forward FLOPs of each length (docs/model.md#imbalance)."""
    if training.sequence_lengths is None:
        return float(training.work_cv)
    where = "training.sequence_lengths"
    if training.work_cv:
        raise InputError("give work_cv or sequence_lengths, not both", where=where,
                         allowed="sequence_lengths derives work_cv")
    lengths = parse_sequence_lengths(training.sequence_lengths, where=where)
    if lengths.fixed:
        return 0.0
    if shape is None:
        raise InputError("sequence lengths need a transformer workload (a generic model has no cost per token)",
                         where=where, allowed="work_cv for generic models")
    if lengths.high > seq_len:
        raise InputError(f"longest sample {lengths.high} exceeds seq_len {seq_len}", where=where,
                         allowed="HI <= seq_len")
    costs = transformer.forward_flops(shape, np.arange(lengths.low, lengths.high + 1, dtype=float))
    return balance.length_cost_cv(costs, training.micro_batch)


#: SMs Megatron-Core's flex dispatcher runs its dispatch / combine kernels on when no count is given, with its
#: default backend, DeepEP (TransformerConfig.moe_flex_dispatcher_backend = "deepep", transformer_config.py L898):
#: _DeepepManager calls set_deepep_num_sms(moe_flex_dispatcher_num_sms if it is not None else 20), "DeepEP's
#: historical mcore default" (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/token_dispatcher.py
#: L1287-1292; moe_deepep_num_sms: int = 20 at core_dev_r0.15.0 @0d8e0714) (docs/model.md#contention)
MCORE_FLEX_DEFAULT_SMS = 20
#: HybridEP's own SM count for its dispatch and combine kernels when none is given, (in one NVLink domain, across
#: domains): Megatron-Core passes moe_flex_dispatcher_num_sms through unchanged, None included (_HybridEPManager
#: num_sms_dispatch_api / num_sms_combine_api, token_dispatcher.py L1157-1158 @d98e8a64dd; fused_a2a.py
#: init_hybrid_ep_buffer adds the keyword only when it is not None, L330-333), and HybridEPBuffer then takes
#: ``num_sms_dispatch_api.value_or((num_of_nodes == 1) ? 24 : 8)`` and the same for combine (deepseek-ai/DeepEP
#: hybrid-ep @94a9f8f csrc/hybrid_ep/config.cuh L366-367), num_of_nodes = group size / ranks per NVLink domain
#: (deep_ep/hybrid_ep_buffer.py L83)
HYBRIDEP_DEFAULT_SMS = (24, 8)


def check_ep_dispatch_sms(job: Job, sms: int | None, where: str = "strategy.ep_dispatch_sms") -> int:
    """The grid code of ``ep_dispatch_sms`` (-1 = unset: NCCL's all-to-all, the accelerator's collective_units, or
    with moe_flex_dispatcher the backend's default, :func:`flex_default_sms`); more SMs than the chip has is an input
    error."""
    if sms is None:
        return -1
    if job.compute_units and int(sms) > job.compute_units:
        raise InputError(f"ep_dispatch_sms = {sms} exceeds the {job.compute_units} compute units of "
                         f"{job.accelerator}", where=where,
                         allowed=f"0 to {job.compute_units}, or unset for the dispatcher's default (NCCL's "
                                 f"all-to-all, or the flex dispatcher backend's, moe_flex_backend)")
    return int(sms)


def flex_default_sms(backend: Any, spans_domains: Any) -> np.ndarray:
    """SMs the flex dispatcher's kernels run on when ``ep_dispatch_sms`` is unset: :data:`MCORE_FLEX_DEFAULT_SMS`
    (20) for DeepEP; for HybridEP :data:`HYBRIDEP_DEFAULT_SMS`, 24 when the EP group sits in one NVLink (tier-0)
    domain and 8 when ``spans_domains`` (HybridEP's num_of_nodes > 1). Broadcasts over both (FlexBackend codes,
    bools)."""
    hybrid = np.asarray(backend) == int(FlexBackend.HYBRIDEP)
    inside, across = HYBRIDEP_DEFAULT_SMS
    return np.asarray(np.where(hybrid, np.where(np.asarray(spans_domains, dtype=bool), across, inside),
                               MCORE_FLEX_DEFAULT_SMS), dtype=float)


def ep_dispatch_share(job: Job, g: StrategyGrid, spans_domains: Any = False) -> np.ndarray:
    """Fraction of the compute units the EP dispatch/combine kernels occupy while they run
    (docs/model.md#contention): ``ep_dispatch_sms / compute_units`` where the strategy names a count (DeepEP /
    HybridEP); unset, the default of the dispatcher that runs: with ``moe_flex_dispatcher`` the backend's
    (:func:`flex_default_sms`: DeepEP 20, HybridEP 24 in one NVLink domain or 8 where the EP group
    ``spans_domains``, the placement's ``c_0 < p``) / compute_units, else the collective library's share (NCCL
    all-to-all: :func:`collective_share`); 0 when the accelerator gives no compute-unit count."""
    sms = np.asarray(g.ep_dispatch_sms)
    units = float(job.compute_units)
    if units <= 0:
        return np.zeros(np.broadcast(sms, np.asarray(g.moe_flex_dispatcher)).shape)
    own = np.minimum(np.maximum(sms, 0) / units, 1.0)
    flex_default = np.minimum(flex_default_sms(g.moe_flex_backend, spans_domains) / units, 1.0)
    unset = np.where(np.asarray(g.moe_flex_dispatcher, dtype=bool), flex_default, job.collective_share)
    return np.asarray(np.where(sms >= 0, own, unset), dtype=float)


def collective_share(acc: Any, nvls: bool = True) -> float:
    """Fraction of the chip's compute units the collective library occupies while a collective runs:
    NCCL runs each channel as one CTA on one SM (docs/model.md#contention); 0 when either count is
    unknown or the collectives run on other engines. ``nvls``: the collective is an all-reduce NCCL runs as NVLink
    SHARP on the node's NVLink tier (:func:`scalemodel.cost.nccl.nvls_on`), which takes the accelerator's
    ``collective_units_nvls`` channels where it states them (Hopper: 16 NVLS against 24 ring channels), else
    ``collective_units`` (every ring / tree / p2p collective, NVLS on or off: ``Job.collective_share``)."""
    units, coll_units = getattr(acc, "compute_units", None), getattr(acc, "collective_units", None)
    nvls_units = getattr(acc, "collective_units_nvls", None)
    if nvls and nvls_units is not None:
        coll_units = nvls_units
    if not units or not coll_units:
        return 0.0
    return min(float(coll_units) / float(units), 1.0)


class StrategyGrid(msgspec.Struct, frozen=True, eq=False, dict=True):  # numpy fields: == has no single truth value
    """Candidate strategies as mutually broadcastable numpy arrays (the planner's unit of work).

    A msgspec Struct, as :class:`Job` is (its 73 fields as a dataclass: ~22 M instructions at import); ``dict=True``
    for the cached :attr:`shape` (``msgspec.structs.replace`` builds a new grid without the cache).

    Fields may have different but broadcast-compatible shapes: a planner puts each choice on its
    own axis (tp of shape (4,1,1), pp (1,5,1), ...), so a cost that depends on few choices is
    computed on a small sub-grid and broadcast, not recomputed for every candidate.
    """

    gpus: np.ndarray
    dp: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    micro_batch: np.ndarray
    global_batch: np.ndarray  # sequences (samples) per step
    schedule: np.ndarray  # choices.ScheduleKind codes
    virtual_stages: np.ndarray
    zero: np.ndarray  # choices.Zero codes
    recompute: np.ndarray  # choices.Recompute codes
    sequence_parallel: np.ndarray  # bool
    overlap: np.ndarray  # bool: DP communication overlapped with backward
    compression: np.ndarray  # choices.CompressionKind codes
    topk_ratio: np.ndarray  # kept fraction for top-k
    ps_servers: np.ndarray  # 0 = all-reduce, K > 0 = parameter server with K servers
    ps_colocated: np.ndarray  # bool
    algorithm: np.ndarray  # choices.Algorithm codes
    dynamic_assignment: np.ndarray  # bool: micro-batches pulled from a shared queue
    bucket_bytes: np.ndarray  # gradient bucket of the DP synchronisation; 0 = the framework's default
    flash_attention: np.ndarray  # bool: fused attention, no s x s score matrix
    dispatch_overhead: np.ndarray  # seconds of scheduling per dynamically assigned micro-batch
    shard_group: np.ndarray  # HSDP: data-parallel replicas per sharding group; 0 = the replicas in one node
    first_stage_layers: np.ndarray  # layers on the first pipeline stage; -1 = the balanced split
    last_stage_layers: np.ndarray  # layers on the last pipeline stage; -1 = the balanced split
    first_chunk_layers: np.ndarray  # interleaved: layers in the first model chunk; -1 = the balanced split
    etp: np.ndarray  # expert tensor parallelism; 0 = tp
    last_chunk_layers: np.ndarray  # interleaved: layers in the last model chunk; -1 = the balanced split
    stage_split: np.ndarray  # strategy.stage_layers: its code in STAGE_SPLITS (stage_split_code); -1 = none given
    layout: np.ndarray  # choices.Layout codes: the rank order of the parallel dimensions
    recompute_layers: np.ndarray  # full recompute: layers per pipeline chunk recomputed; -1 = every layer
    recompute_uniform: np.ndarray  # bool: recompute_layers is Megatron's uniform chunk size, not block's count
    offload_layers: np.ndarray  # layers per stage whose activations go to host memory (0 = none)
    offload_tensors: np.ndarray  # bits of specs.training.OFFLOAD_TENSORS: named tensors of every layer to host memory
    offload_states: np.ndarray  # choices.StateOffload codes: model states in host memory, CPU optimizer
    tp_comm_overlap: np.ndarray  # bool: TP collectives overlapped with the GEMMs (userbuffers)
    tp_async_allreduce: np.ndarray  # bool: backward TP collectives under the weight-gradient GEMMs (Megatron async)
    overlap_param_gather: np.ndarray  # bool: ZeRO-1/2 parameter all-gather under the next first forward
    moe_a2a_overlap: np.ndarray  # bool: EP all-to-alls overlapped with another micro-batch's compute
    moe_shared_expert_overlap: np.ndarray  # bool: shared experts on their own stream beside the EP all-to-alls
    moe_shared_expert_stream: np.ndarray  # bool: the whole shared MLP on a side stream beside the dispatch (Automodel)
    recompute_modules: np.ndarray  # selective recompute: bits of cost.memory.RECOMPUTE_MODULES (0 = core_attn)
    moe_layer_host_s: np.ndarray  # host seconds per MoE layer forward+backward after its host sync; 0 = not priced
    ep_dispatch_sms: np.ndarray  # SMs the EP dispatch/combine kernels occupy; -1 = NCCL's (collective_units)
    moe_flex_dispatcher: np.ndarray  # bool: hierarchical EP dispatch (DeepEP / HybridEP), not NCCL's all-to-all
    moe_allgather_dispatcher: np.ndarray  # bool: Megatron-Core's allgather dispatcher (AG / RS over etp x ep)
    moe_flex_backend: np.ndarray  # choices.FlexBackend codes: the flex dispatcher's backend (DeepEP / HybridEP)
    deepspeed_pipeline: np.ndarray  # bool: DeepSpeed PipelineEngine p2p and gradient accumulation
    nanotron_trainer: np.ndarray  # bool: nanotron's fp32 accumulation pass, ZeRO-1 fp32 all-reduce + one all-gather
    fsdp_reshard_after_forward: np.ndarray  # bool: ZeRO-3/FSDP units free their gathered parameters after forward
    fsdp_fp8_all_gather: np.ndarray  # bool: FSDP all-gathers the linear weights in float8 (torchao)
    fsdp_flat_param: np.ndarray  # bool: FSDP1 FlatParameter gradient passes (cat, cast, pre-divide) per micro-batch
    fsdp_per_param: np.ndarray  # bool: FSDP2 (fully_shard) copy-out after each gather, copy-in before each reduce
    fsdp_defer_grad_sync: np.ndarray  # bool: FSDP2 reduce-scatters once a step, keeps backward's gathers (per stage)
    xla_gpu_lhs: np.ndarray  # bool: FSDP/HSDP collectives under XLA's GPU latency-hiding scheduler windows
    attention_unpad: np.ndarray  # bool: flash-attn varlen on unpad_input/pad_input copies of Q, K, V and the output
    moe_fp8_padding: np.ndarray  # bool: an fp8 run's experts pad/unpad their routed tokens (TE Fp8Padding copies)
    moe_permute_fusion: np.ndarray  # bool: the MoE token permutations run TE's fused kernels (False: unfused)
    megatron_ddp: np.ndarray  # bool: Megatron-Core DDP's gradient buckets (max(4e7, 1e6 dp cp) elements)
    align_grad_reduce: np.ndarray  # bool: interleaved Megatron-Core DDP syncs a chunk after its last backward
    grad_accumulation_fusion: np.ndarray  # bool: Megatron wgrad GEMMs accumulate into main_grad (False: a DDP add)
    main_grad_hook: np.ndarray  # bool: NeMo 1 O2's per-parameter hook adds each gradient into the main-grad buffer
    bucket_fragments: np.ndarray  # bool: NeMo 1's Apex buckets: cut tensors, coalesced a layer (coalesced_launches)
    align_param_gather: np.ndarray  # bool: interleaved Megatron-Core DDP gathers chunk j+1 at chunk j's 1st forward
    overlap_param_gather_with_optimizer_step: np.ndarray  # bool: chunk 0 unbucketed, gathered in the optimizer step
    fp8_param_gather: np.ndarray  # bool: ZeRO-1/2 gathers and holds the linear weights in FP8 (Megatron)
    fp4_param_gather: np.ndarray  # bool: ZeRO-1/2 gathers and holds the linear weights in NVFP4 (Megatron)
    loss_dp_allreduce: np.ndarray  # bool: a blocking all-reduce of each micro-batch's loss over DP (NeMo 1/2)
    check_for_nan_in_grad: np.ndarray  # bool: Megatron-Core DDP's per-bucket gradient-norm NaN/Inf check (host reads)
    check_for_nan_in_loss: np.ndarray  # bool: the loss function's per-micro-batch NaN/Inf check (host reads)
    loss_token_count_read: np.ndarray  # bool: the loss function reads the micro-batch's token count (NeMo 2.2/2.3)
    defer_embedding_wgrad: np.ndarray  # bool: the output layer's wgrad GEMMs deferred to the pipeline flush (MCore)
    loss_impl: np.ndarray  # choices.LossImpl codes: the cross-entropy's implementation (its passes over the logits)
    layer_impl: np.ndarray  # choices.LayerImpl codes: the layer's memory-bound ops' implementation (bytes per token)
    cp_comm_type: np.ndarray  # choices.CpCommType codes: context parallelism's exchange (p2p ring, all_gather, a2a)
    cp_a2a_size: np.ndarray  # cp_comm_type a2a+p2p: CP ranks per all-to-all group (the ring spans cp / this)
    pp_scatter_gather: np.ndarray  # bool: legacy Megatron-LM's pipeline scatter/gather (b s h / t + TP all-gather)
    overlap_p2p_comm: np.ndarray  # bool: the interleaved pipeline's p2p hidden in the steady phase (pp_overlap)
    overlap_p2p_send_wait: np.ndarray  # bool: under it, each forward send waited at once (activation sends exposed)
    eager_rope: np.ndarray  # bool: RoPE as Megatron-Core's eager ATen kernels (compute.eager_rope_bytes)
    mla_column_down_proj: np.ndarray  # bool: MLA's down-projections TP column linears (mla_down_proj_gathers)
    eager_glu_clamp: np.ndarray  # bool: the experts' activation clamp outside the fused kernel (eager_glu_clamp_bytes)
    eager_expert_bias: np.ndarray  # bool: the experts' FC2 bias added per expert (compute.eager_expert_bias_bytes)
    eager_bias_dropout_add: np.ndarray  # bool: Megatron-Core's unfused bias-dropout-add (eager_bias_dropout_add_bytes)
    moe_host_attention_graphed: np.ndarray  # bool: attention CUDA-graphed: its eager calls add no host time (step)
    eager_activation: np.ndarray  # bool: the MLP activation as eager ATen kernels (compute.eager_activation_bytes)
    fp8_wgrad: np.ndarray  # bool: an fp8 delayed-scaling run's weight-gradient GEMMs in FP8 (false: 16-bit)
    tp_comm_overlap_ag: np.ndarray  # bool: tp_comm_overlap's userbuffers all-gathers (false: NCCL, exposed)
    tp_comm_overlap_rs: np.ndarray  # bool: tp_comm_overlap's pipelined forward reduce-scatters (false: NCCL, exposed)
    tp_comm_bulk_dgrad: np.ndarray  # bool: tp_comm_overlap's bulk input re-gathers (false: NCCL async, same GEMM)
    tp_comm_bulk_wgrad: np.ndarray  # bool: tp_comm_overlap's bulk input-gradient RS (false: NCCL async, same GEMM)
    train_metric_passes: np.ndarray  # eager cross-entropy passes over the logits per micro-batch (training metrics)
    train_metric_states: np.ndarray  # metric states gathered over all ranks once a step (train_metric_sync_time)
    wgrad_deferral_limit: np.ndarray  # under defer_embedding_wgrad: the most micro-batches deferred (0 = all)

    @cached_property
    def shape(self) -> tuple[int, ...]:
        # each distinct field shape once (the ~70 fields have a handful): broadcasting every field's shape took
        # ~0.1 ms a call; a plan asks for it hundreds of times (evaluate, take_one), once per grid since speed29
        # (a grid's fields are never reassigned, and no numpy array here is reshaped in place)
        return tuple(np.broadcast_shapes(*{getattr(self, name).shape for name in _GRID_FIELDS}))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def flat(self) -> StrategyGrid:
        """The same candidates as 1-D arrays of length ``size`` (materialised)."""
        shape = self.shape
        return replace(self, **{name: np.broadcast_to(getattr(self, name), shape).ravel() for name in _GRID_FIELDS})

    def take(self, index: Any) -> StrategyGrid:
        """Candidates at flat positions ``index``."""
        shape = self.shape
        return replace(self, **{name: np.broadcast_to(getattr(self, name), shape).ravel()[index]
                                for name in _GRID_FIELDS})

    def describe(self, i: int) -> dict[str, Any]:
        """Candidate i (flat position) as the strategy dict of the JSON output."""
        if self.gpus.ndim != 1 or self.gpus.size != self.size:
            return self.take(np.asarray([i])).describe(0)

        sched = ScheduleKind.of(self.schedule[i])
        comp = CompressionKind.of(self.compression[i])
        ps = int(self.ps_servers[i])
        return {
            "gpus": int(self.gpus[i]), "dp": int(self.dp[i]), "tp": int(self.tp[i]), "pp": int(self.pp[i]),
            "cp": int(self.cp[i]), "ep": int(self.ep[i]), "micro_batch": int(self.micro_batch[i]),
            "global_batch": int(self.global_batch[i]),
            "schedule": Schedule(sched, int(self.virtual_stages[i])).label,
            "zero": Zero.of(self.zero[i]).label,
            "recompute": Recompute.of(self.recompute[i]).label,
            "sequence_parallel": bool(self.sequence_parallel[i]), "overlap": bool(self.overlap[i]),
            "compression": Compression(comp, float(self.topk_ratio[i])).label,
            "dp_comm": DpComm(ps, bool(self.ps_colocated[i])).label,
            "algorithm": Algorithm.of(self.algorithm[i]).label,
            "assignment": Assignment.of(self.dynamic_assignment[i]).label,
            "dispatch_overhead_s": float(self.dispatch_overhead[i]),
            "bucket_bytes": float(self.bucket_bytes[i]) or None,  # None: the framework's default
            "flash_attention": bool(self.flash_attention[i]),
            "shard_group": int(self.shard_group[i]) or None,
            "first_stage_layers": int(self.first_stage_layers[i]) if self.first_stage_layers[i] >= 0 else None,
            "last_stage_layers": int(self.last_stage_layers[i]) if self.last_stage_layers[i] >= 0 else None,
            "first_chunk_layers": int(self.first_chunk_layers[i]) if self.first_chunk_layers[i] >= 0 else None,
            "etp": int(self.etp[i]) or None,
            "last_chunk_layers": int(self.last_chunk_layers[i]) if self.last_chunk_layers[i] >= 0 else None,
            "stage_layers": list(STAGE_SPLITS[int(self.stage_split[i])]) if self.stage_split[i] >= 0 else None,
            "layout": Layout.of(self.layout[i]).label,
            "recompute_layers": int(self.recompute_layers[i]) if self.recompute_layers[i] >= 0 else None,
            "recompute_method": (RecomputeMethod.UNIFORM if self.recompute_uniform[i] else RecomputeMethod.BLOCK).label,
            "offload_layers": int(self.offload_layers[i]), "tp_comm_overlap": bool(self.tp_comm_overlap[i]),
            "offload_tensors": [n for b, n in enumerate(OFFLOAD_TENSORS) if int(self.offload_tensors[i]) >> b & 1],
            "offload_states": StateOffload.of(self.offload_states[i]).label,
            "tp_async_allreduce": bool(self.tp_async_allreduce[i]),
            "overlap_param_gather": bool(self.overlap_param_gather[i]),
            "moe_a2a_overlap": bool(self.moe_a2a_overlap[i]),
            "moe_shared_expert_overlap": bool(self.moe_shared_expert_overlap[i]),
            "moe_shared_expert_stream": bool(self.moe_shared_expert_stream[i]),
            "recompute_modules": ",".join(k for k, v in memory.RECOMPUTE_MODULES.items()
                                          if int(self.recompute_modules[i]) & v),
            "moe_layer_host_s": float(self.moe_layer_host_s[i]),
            "ep_dispatch_sms": int(self.ep_dispatch_sms[i]) if self.ep_dispatch_sms[i] >= 0 else None,
            "moe_flex_dispatcher": bool(self.moe_flex_dispatcher[i]),
            "moe_allgather_dispatcher": bool(self.moe_allgather_dispatcher[i]),
            "moe_flex_backend": FlexBackend.of(self.moe_flex_backend[i]).label,
            **{name: bool(getattr(self, name)[i]) for name in _FRAMEWORK_SWITCHES},
            "loss_impl": LossImpl.of(self.loss_impl[i]).label,
            "layer_impl": LayerImpl.of(self.layer_impl[i]).label,
            "cp_comm_type": CpCommType.of(self.cp_comm_type[i]).label,
            "cp_a2a_size": int(self.cp_a2a_size[i]),
            **{name: bool(getattr(self, name)[i]) for name in _KERNEL_SWITCHES},
            "train_metric_passes": int(self.train_metric_passes[i]),
            "train_metric_states": int(self.train_metric_states[i]),
            "wgrad_deferral_limit": int(self.wgrad_deferral_limit[i]),
        }


#: Strategy switches a StrategyGrid holds as the strategy gives them: a bool field of the same name in StrategySpec
#: and StrategyGrid, read by :func:`grid_from_strategy` (a strategy without the field takes :data:`GRID_DEFAULTS`')
#: and written back by :meth:`StrategyGrid.describe` in this order (the JSON strategy's keys). Two runs, as describe
#: writes them with the loss, layer and CP choices between: mostly the frameworks' data-parallel / FSDP variants,
#: then the pipeline's p2p and the eager kernels.
_FRAMEWORK_SWITCHES: tuple[str, ...] = (
    "deepspeed_pipeline", "nanotron_trainer", "fsdp_reshard_after_forward", "fsdp_fp8_all_gather", "fsdp_flat_param",
    "fsdp_per_param", "fsdp_defer_grad_sync", "xla_gpu_lhs", "attention_unpad", "moe_fp8_padding",
    "moe_permute_fusion", "megatron_ddp",
    "align_grad_reduce", "grad_accumulation_fusion", "main_grad_hook", "bucket_fragments", "align_param_gather",
    "overlap_param_gather_with_optimizer_step", "fp8_param_gather",
    "fp4_param_gather", "loss_dp_allreduce", "check_for_nan_in_grad", "check_for_nan_in_loss",
    "loss_token_count_read", "defer_embedding_wgrad")
_KERNEL_SWITCHES: tuple[str, ...] = (
    "pp_scatter_gather", "overlap_p2p_comm", "overlap_p2p_send_wait", "eager_rope", "mla_column_down_proj",
    "eager_glu_clamp", "eager_expert_bias", "eager_bias_dropout_add", "moe_host_attention_graphed", "eager_activation",
    "fp8_wgrad", *TP_COMM_PARTS)


#: The value every StrategyGrid field takes when a caller does not give it (the fields without one, gpus, dp, tp,
#: pp, micro_batch and global_batch, are always given); its type is the field's dtype (:func:`grid_from_arrays`).
GRID_DEFAULTS: dict[str, Any] = dict(
    cp=1, ep=1, schedule=ScheduleKind.ONE_F_ONE_B, virtual_stages=1, zero=Zero.NONE, recompute=Recompute.NONE,
    sequence_parallel=False, overlap=True, compression=CompressionKind.NONE, topk_ratio=1.0, ps_servers=0,
    # dispatch_overhead: StrategySpec's None, Ray's measured task round trip (cost.balance), for every grid: plan's
    # grids took 0.0 here while predict's took the round trip, so plan ranked dynamic assignment at a free queue
    # (consist38: 1.929 s against predict's 1.946 s for the same pinned strategy, GPT 1.7B on 128 A100s)
    ps_colocated=False, algorithm=Algorithm.AUTO, dynamic_assignment=False,
    dispatch_overhead=balance.DEFAULT_DISPATCH_OVERHEAD_S, bucket_bytes=0.0,
    flash_attention=True, shard_group=0, first_stage_layers=-1, last_stage_layers=-1, first_chunk_layers=-1,
    last_chunk_layers=-1, stage_split=-1,
    etp=0, layout=Layout.TP_CP_DP_PP, recompute_layers=-1, recompute_uniform=False,
    offload_layers=0, offload_tensors=0, offload_states=StateOffload.NONE, tp_comm_overlap=False,
    tp_async_allreduce=True, overlap_param_gather=False,
    moe_a2a_overlap=False, moe_shared_expert_overlap=False, moe_shared_expert_stream=False, recompute_modules=0,
    moe_layer_host_s=0.0,
    ep_dispatch_sms=-1, moe_flex_dispatcher=False, moe_allgather_dispatcher=False, moe_flex_backend=FlexBackend.DEEPEP,
    deepspeed_pipeline=False, nanotron_trainer=False, fsdp_reshard_after_forward=True, fsdp_fp8_all_gather=False,
    fsdp_flat_param=False,
    fsdp_per_param=False, fsdp_defer_grad_sync=False, xla_gpu_lhs=False, attention_unpad=False,
    moe_fp8_padding=False, moe_permute_fusion=True,
    megatron_ddp=False, align_grad_reduce=True, grad_accumulation_fusion=True, main_grad_hook=False,
    bucket_fragments=False,
    align_param_gather=True, overlap_param_gather_with_optimizer_step=False, fp8_param_gather=False,
    fp4_param_gather=False, loss_dp_allreduce=False,
    check_for_nan_in_grad=False, check_for_nan_in_loss=False, loss_token_count_read=False,
    defer_embedding_wgrad=False, wgrad_deferral_limit=0,
    loss_impl=LossImpl.MEGATRON, layer_impl=LayerImpl.MEGATRON_TE, cp_comm_type=CpCommType.P2P, cp_a2a_size=1,
    pp_scatter_gather=False,
    overlap_p2p_comm=False, overlap_p2p_send_wait=True,
    eager_rope=False, mla_column_down_proj=False, eager_glu_clamp=False, eager_expert_bias=False,
    eager_bias_dropout_add=False, moe_host_attention_graphed=False, train_metric_passes=0, train_metric_states=0,
    eager_activation=False, fp8_wgrad=True, **dict.fromkeys(TP_COMM_PARTS, True))


#: StrategyGrid's field names, in order (:attr:`StrategyGrid.shape`).
_GRID_FIELDS: tuple[str, ...] = StrategyGrid.__struct_fields__


def grid_from_arrays(**arrays: Any) -> StrategyGrid:
    """A StrategyGrid from broadcast-compatible keyword arrays (missing fields take their defaults).

    Shapes are kept (not materialised): pass axis-shaped arrays for a cartesian product.
    """
    values = {**GRID_DEFAULTS, **arrays}
    names = _GRID_FIELDS
    missing = [n for n in names if n not in values]
    if missing:
        raise TypeError(f"missing strategy arrays: {missing}")
    out: dict[str, np.ndarray] = {}
    for n in names:
        # each field's dtype follows its default's type (a flag's default is a bool, a rate's a float, a count's or a
        # choice code's an int); the fields without a default (gpus, dp, tp, pp, micro_batch, global_batch) are counts
        d = GRID_DEFAULTS.get(n, 0)
        kind = bool if isinstance(d, bool) else float if isinstance(d, float) else np.int64
        out[n] = np.asarray(values[n], dtype=kind)
    # torchtitan's default expert TP is 1 where ep > 1 (specs.torchtitan_config._titan_etp; _grid_from_strategy
    # applies it to predict's grid): the planner's candidates take it here too, or plan priced a torchtitan candidate
    # at Megatron's etp = tp and predict of the plan's own strategy at etp 1
    titan = np.isin(out["layer_impl"], TORCHTITAN_LAYERS) & (out["etp"] == 0) & (out["ep"] > 1)
    if np.any(titan):
        out["etp"] = np.asarray(np.where(titan, 1, out["etp"]), dtype=np.int64)
    try:
        np.broadcast_shapes(*(a.shape for a in out.values()))
    except ValueError as exc:
        raise TypeError(f"strategy arrays do not broadcast: {exc}") from None
    return StrategyGrid(**out)


#: Every per-stage split (strategy.stage_layers) a grid has named, by code (StrategyGrid.stage_split): the grid holds
#: numbers only, so a split is interned here once and its candidates carry its index (stage_split_code)
STAGE_SPLITS: list[tuple[int, ...]] = []


def stage_split_code(layers: Any) -> int:
    """The code of the per-stage split ``layers`` (decoder layers per pipeline stage, or per virtual stage for an
    interleaved schedule: strategy.stage_layers) in :data:`STAGE_SPLITS`, added the first time it is asked for."""
    split = tuple(int(n) for n in layers)
    if split not in STAGE_SPLITS:
        STAGE_SPLITS.append(split)
    return STAGE_SPLITS.index(split)


def check_stage_layers(job: Job, split: Any, where: str = "strategy.stage_layers") -> None:
    """Refuse a per-stage split (strategy.stage_layers) the model cannot take: a generic model (no layers), a hybrid
    pattern (its '|' segments are its split: Megatron-LM's validate_args refuses a layout beside them), a count below
    0, or counts whose sum is not the model's decoder layers."""
    counts = [int(n) for n in split]
    if len(counts) < 2:  # round 18: plan searched every candidate to find none ("layers_not_divisible" for all)
        raise InputError(f"{len(counts)} count{'s' if len(counts) != 1 else ''}: a split of the layers over pipeline "
                         "stages needs one count per stage, and a pipeline at least 2 stages", where=where,
                         allowed="pp x V counts (pp >= 2), or leave stage_layers out")
    if not job.is_transformer:
        raise InputError("stage_layers splits a transformer's decoder layers; this model has none", where=where,
                         allowed="a transformer model, or leave stage_layers out")
    if job.shape.hybrid is not None:
        raise InputError("stage_layers with a hybrid layer pattern: the pattern's '|' segments are its pipeline split",
                         where=where, allowed="'|' in the hybrid pattern (docs/model.md#hybrid-segments), or leave "
                                              "stage_layers out")
    if any(n < 0 for n in counts):
        raise InputError(f"a stage of {min(counts)} layers", where=where,
                         allowed="counts >= 0 (a stage may hold none, as Megatron's layout allows)")
    layers = int(job.shape.layers)
    if sum(counts) != layers:
        raise InputError(f"the stages hold {sum(counts)} layers ({', '.join(map(str, counts))}) but the model has "
                         f"{layers}", where=where, allowed=f"counts summing to {layers}")


#: The strategy fields that split the layers another way than stage_layers
OTHER_SPLITS = ("first_stage_layers", "last_stage_layers", "first_chunk_layers", "last_chunk_layers")


def refuse_two_splits(taken: list[str], where: str) -> None:
    """Refuse stage_layers beside another split of the layers (``taken``: the :data:`OTHER_SPLITS` set), for predict
    (:func:`_check_stage_layers`) and plan alike."""
    if taken:
        raise InputError(f"stage_layers and {taken[0]} are both set", where=where,
                         allowed="one way of splitting the layers: stage_layers (every stage's count) or "
                                 "first/last_stage_layers (or first/last_chunk_layers)")


def _check_stage_layers(job: Job, strategy: Any) -> None:
    """strategy.stage_layers: one way of splitting the layers, one count per (virtual) stage, the model's layers."""
    split = getattr(strategy, "stage_layers", None)
    if split is None:
        return
    refuse_two_splits([n for n in OTHER_SPLITS if getattr(strategy, n, None) is not None], "strategy.stage_layers")
    sch = parse_schedule(strategy.schedule)
    v = sch.virtual_stages if sch.kind == ScheduleKind.INTERLEAVED else 1
    if strategy.pp < 2:
        raise InputError(f"stage_layers ({len(split)} counts) with pp {strategy.pp}: no pipeline to split",
                         where="strategy.stage_layers", allowed="pp >= 2, or leave stage_layers out")
    if len(split) != strategy.pp * v:
        raise InputError(f"{len(split)} counts for pp {strategy.pp}" + (f" x {v} virtual stages" if v > 1 else ""),
                         where="strategy.stage_layers",
                         allowed=f"{strategy.pp * v} counts: one per " + ("virtual stage (pp x V, virtual stage c of "
                                                                          "rank r at c pp + r)" if v > 1 else
                                                                          "pipeline stage"))
    check_stage_layers(job, split)


def _offload_tensor_names(strategy: Any) -> list[str]:
    """strategy offload_tensors (MaxText's named tensors to host memory), [] where the strategy has none: the one
    reading of it for the refusals below and StrategyGrid.offload_tensors' bits."""
    return list(getattr(strategy, "offload_tensors", []) or [])


def _check_host_link(job: Job, strategy: Any) -> None:
    """Offload to host memory (docs/model.md#offload: strategy offload_layers, Megatron's activation offload on GPUs,
    and offload_tensors, MaxText's named tensors on TPUs) is priced over the accelerator-host link: refused where the
    cluster does not give its rate (ClusterSpec.host_bandwidth), offload_layers named first when both are set."""
    if job.host_bandwidth > 0:
        return
    named = ", ".join(_offload_tensor_names(strategy))
    for field, given, chip, off, rate in (
            ("offload_layers", strategy.offload_layers > 0 and f"offload_layers={strategy.offload_layers}", "GPU",
             "offload_layers: 0", "64GB/s (per GPU, per direction)"),
            ("offload_tensors", named and f"offload_tensors [{named}]", "accelerator", "offload_tensors: []",
             "32GB/s (per chip and direction)")):
        if given:
            raise InputError(f"{given} needs the {chip}-host link rate, which cluster {job.cluster_name} does not give",
                             where=f"strategy.{field}", allowed=f"{off}, or --set cluster.host_bandwidth={rate}")


def _check_offload_tensor_layers(job: Job, strategy: Any) -> None:
    """strategy offload_tensors on a hybrid layer pattern: refused (mem35). Its names are MaxText's tags on an attention
    decoder layer (dp_comm.offloaded_tensor_bytes prices q, k, v and out_proj at the attention widths, on every layer
    of the stage), which a Mamba-2 layer does not have; and no framework the model reads offloads a Mamba layer's
    tensors by name: Megatron-Core's fine-grained offload takes only attn_norm, qkv_linear, core_attn, attn_proj,
    mlp_norm, expert_fc1, moe_act, fused_group_mlp and gdp_qkv (transformer_config.py ``offload_modules``
    L1328-1341 and ``allowed_modules`` L2132-2142 at NVIDIA/Megatron-LM@d98e8a64dd; megatron/core/ssm/mamba_mixer.py
    and mamba_layer.py read no offload option), and MaxText's remat policies that offload them
    (recompute_modules jax_qkvo / jax_qkv) are priced on a dense block only (:func:`_check_titan_op`)."""
    names = _offload_tensor_names(strategy)
    if names and job.is_transformer and job.shape.hybrid is not None:
        raise InputError(f"offload_tensors [{', '.join(names)}] names MaxText's attention-layer tensors, which this "
                         "model's Mamba-2 layers (a hybrid layer pattern) do not have, and no framework offloads a "
                         "Mamba layer's tensors by name (Megatron-Core's --offload-modules has no Mamba module)",
                         where="strategy.offload_tensors",
                         allowed="offload_tensors: [] with a hybrid layer pattern")


def _check_state_offload(job: Job, strategy: Any, training: Any) -> None:
    """Model states in host memory (strategy offload_states, docs/model.md#state-offload) are priced over the
    GPU-host link (ClusterSpec.host_bandwidth) and with a CPU-Adam step (cost.compute.CPU_ADAM_PARAMS_PER_S, a
    DeepSpeedCPUAdam measurement): refused without the link, with another optimizer (DeepSpeed's other CPU optimizers,
    Adagrad and Lion, are not measured here), and beside activation offload (offload_layers / offload_tensors: the
    same link's bytes priced by two routes that do not share it)."""
    mode = StateOffload.parse(getattr(strategy, "offload_states", "none"), "strategy.offload_states")
    if mode == StateOffload.NONE:
        return
    optimizer = str(getattr(training, "optimizer", None) or "adam")
    named = ", ".join(_offload_tensor_names(strategy))
    for bad, what, allowed in (
            (job.host_bandwidth <= 0, f"offload_states {mode.label} needs the GPU-host link rate, which cluster "
             f"{job.cluster_name} does not give", "offload_states: none, or --set cluster.host_bandwidth=64GB/s (per "
             "GPU, per direction)"),
            (optimizer != "adam", f"offload_states {mode.label} prices the host step from a CPU-Adam measurement; "
             f"the training optimizer is {optimizer}", "offload_states: none, or training optimizer adam"),
            (strategy.offload_layers > 0 or bool(named), f"offload_states {mode.label} beside activation offload "
             f"({'offload_layers=' + str(strategy.offload_layers) if strategy.offload_layers > 0 else named}): both "
             "use the GPU-host link and are priced as if each had it alone", "offload_states: none, or "
             "offload_layers: 0 and offload_tensors: []")):
        if bad:
            raise InputError(what, where="strategy.offload_states", allowed=allowed)
    if job.host_memory <= 0:  # unknown capacity: priced, but its fit is not checked (docs/model.md#host-memory)
        notices.warn(f"offload_states {mode.label}: cluster {job.cluster_name} gives no host_memory, so whether the "
                     "states fit the node's host memory is not checked (--set cluster.host_memory=2TB, the node's "
                     "DRAM; docs/model.md#host-memory)")


def _check_offload_tensors(job: Job, strategy: Any) -> None:
    """strategy offload_tensors (docs/model.md#offload) is MaxText's remat offload of named tensors: refused (after
    :func:`_check_host_link`) beside whole-layer offload (one route per layer), without a transformer layer, and with
    a recompute other than selective jax_qkvo or jax_qkv, the remat policies whose saved tensors (q, k, v, out_proj
    and the layer input; jax_qkv: not out_proj, which it recomputes) are the ones that can go to host memory instead
    (src/MaxText/layers/decoders.py at 92e59fdf5)."""
    names = _offload_tensor_names(strategy)
    if not names:
        return
    named = ", ".join(names)
    modules = set(filter(None, str(getattr(strategy, "recompute_modules", "") or "").split(",")))
    refusals = (
        (strategy.offload_layers > 0, f"offload_tensors [{named}] beside offload_layers={strategy.offload_layers}: a "
         "layer is offloaded whole or by named tensors, not both",
         "offload_tensors: [] with offload_layers, or offload_layers: 0"),
        (not job.is_transformer, "offload_tensors names tensors of a transformer layer; this model has none",
         "offload_tensors: [] with a non-transformer workload"),
        (Recompute.parse(strategy.recompute) != Recompute.SELECTIVE or not modules & {"jax_qkvo", "jax_qkv"},
         f"offload_tensors [{named}] is priced on MaxText's remat policies that keep q, k, v and out_proj, or q, k "
         f"and v (recompute selective, recompute_modules jax_qkvo or jax_qkv); got recompute {strategy.recompute} "
         f"with recompute_modules {','.join(sorted(modules)) or '(none)'}",
         "recompute: selective with recompute_modules jax_qkvo or jax_qkv, or offload_tensors: []"),
        ("jax_qkv" in modules and "out_proj" in names,
         f"offload_tensors [{named}] names out_proj, which recompute_modules jax_qkv recomputes (MaxText: out_proj "
         "'remat'), so it is not kept to be offloaded",
         "offload_tensors without out_proj, or recompute_modules jax_qkvo (out_proj 'offload')"),
    )
    for refused, message, allowed in refusals:
        if refused:
            raise InputError(message, where="strategy.offload_tensors", allowed=allowed)


def _check_chunk_layers(strategy: Any) -> None:
    """First/last model-chunk layers describe an interleaved pipeline's chunks; refuse them otherwise."""
    for name in ("first_chunk_layers", "last_chunk_layers"):
        if getattr(strategy, name, None) is not None and parse_schedule(strategy.schedule).virtual_stages < 2:
            raise InputError(f"{name} is set but the schedule is {strategy.schedule}", where=f"strategy.{name}",
                             allowed="an interleaved:V schedule (V >= 2), or first/last_stage_layers for 1f1b")
    if strategy.first_chunk_layers is not None or strategy.last_chunk_layers is not None:
        if strategy.first_stage_layers is not None or strategy.last_stage_layers is not None:
            raise InputError("first/last_chunk_layers and first/last_stage_layers are both set",
                             where="strategy.first_chunk_layers", allowed="one way of splitting the layers")


def _even_rest_text(layers: int, parts: int, taken: str, what: str) -> str:
    """What an edge split may be: with no part between the edges, edges summing to the layers; else a rest that
    the ``parts`` between share evenly, at least one layer each."""
    if parts == 0:
        return f"{taken} summing to the model's {layers} layers"
    return f"{taken} leaving the {parts} {what} between an equal share of at least 1 layer each"


def _check_edge_split(job: Job, strategy: Any) -> None:
    """Given first/last stage (or model-chunk) layers split the model's layers as Megatron-Core's TransformerConfig
    does (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/transformer_config.py L2294-2367): the layers
    left once the given edge stages take theirs go to the stages between, "either ... middle pp stages and layers
    or none of them" (L2340-2345: at pp 2 with both edges given, first + last = L) and an equal share each (L2347-
    2353: the rest divisible by the middle stages). Refused here rather than priced infeasible (round 24: 1 + 1 of
    12 layers at pp 2 showed a step below its own compute floor). Interleaved:V chunks alike over pp x V chunks
    (the account-for-embedding/loss split's chunk sizes, pipeline_ranks._chunk_layers). A hybrid pattern's
    segments and a non-transformer's are refused elsewhere (pipeline_ranks._layers_split)."""
    if not job.is_transformer or (job.shape.hybrid is not None and int(job.shape.hybrid.segments) > 1):
        return
    layers = int(job.shape.layers)
    sch = parse_schedule(strategy.schedule)
    v = sch.virtual_stages if sch.kind == ScheduleKind.INTERLEAVED else 1
    for kind, parts_n, what in (("stage", strategy.pp, "stages"), ("chunk", strategy.pp * v, "model chunks")):
        first, last = getattr(strategy, f"first_{kind}_layers"), getattr(strategy, f"last_{kind}_layers")
        if first is None and last is None:
            continue
        name = f"first_{kind}_layers" if first is not None else f"last_{kind}_layers"
        where = f"strategy.{name}"
        if strategy.pp < 2:
            raise InputError(f"{name} with pp {strategy.pp}: no pipeline to split", where=where,
                             allowed=f"pp >= 2, or leave {name} out")
        given = [n for n in (first, last) if n is not None]
        mid = parts_n - len(given)
        rest = layers - sum(given)
        what = what if mid != 1 else what[:-1]
        taken = " + ".join(f"{e} {n}" for e, n in (("first", first), ("last", last)) if n is not None)
        if mid == 0 and rest != 0:
            raise InputError(f"{taken} = {sum(given)} layers but the model has {layers} and pp {strategy.pp} has "
                             f"no {what} between", where=where,
                             allowed=_even_rest_text(layers, 0, f"first + last {kind} layers", what))
        if mid > 0 and (rest < mid or rest % mid):
            share = "none" if rest <= 0 else f"{rest} / {mid} = {rest / mid:g} each"
            raise InputError(f"{taken} of {layers} layers leaves the {mid} {what} between {share}", where=where,
                             allowed=_even_rest_text(layers, mid, f"first/last {kind} layers", what))
        uneven = [n for n in (*given, rest // mid if mid else 0) if n % v]
        if kind == "stage" and uneven:
            # with virtual stages each rank's layers split into V chunks (L2305-2316, L2324-2335, L2355-2367): priced
            # as before where Megatron-Core accepts it (infeasible: first/last_chunk_layers give an interleaved
            # pipeline's edges, pipeline_ranks._layers_split)
            raise InputError(f"{taken} of {layers} layers gives a stage of {uneven[0]} layers, not a multiple of "
                             f"{strategy.schedule}'s {v} virtual stages", where=where,
                             allowed=f"each stage's layers a multiple of {v} (Megatron-Core's rule), or "
                                     "first/last_chunk_layers for an interleaved pipeline's edges")


def _option(origin: Origin | None, name: str) -> str:
    """The command-line option (``--tp``) or, for a strategy read from a file, that file's field."""
    if origin is None:
        return f"--{name}"
    return origin.gpus if name == "gpus" else origin.field(name)


def _degrees_text(origin: Origin | None, degrees: dict[str, int]) -> str:
    """The degrees to change when the GPU count is not a multiple of tp x pp x cp, named where they were written."""
    if origin is None:
        return "--tp/--pp/--cp"
    if not origin.named:
        return "the strategy's tp/pp/cp"
    wheres = [origin.field(n) for n, v in degrees.items() if v > 1]
    return " / ".join(dict.fromkeys(wheres)) or "tp/pp/cp"


def grid_from_strategy(strategy: Any, training: Any, gpus: int, job: Job, *,
                       origin: Origin | None = None) -> StrategyGrid:
    """One candidate from a StrategySpec + TrainingSpec at ``gpus`` GPUs (DP derived when not given).

    ``origin``: the file fields the strategy and GPU count came from (a sweep row, a measured run; or, per field,
    the options, --strategy file fields, --set items and scenario fields of a command line), so that an error names
    where the value was written (None: every value is an option's, --tp, --gpus, ...)."""
    if origin is None:
        return _grid_from_strategy(strategy, training, gpus, job, None)
    try:
        return _grid_from_strategy(strategy, training, gpus, job, origin)
    except InputError as exc:  # the checks below name strategy.X: here X is the file's field
        if exc.where.startswith("strategy."):
            raise InputError(exc.what, where=origin.field(exc.where.partition(".")[2]),
                             allowed=exc.allowed) from None
        raise


def _grid_from_strategy(strategy: Any, training: Any, gpus: int, job: Job, origin: Origin | None) -> StrategyGrid:
    strategy = resolve_sequence_parallel(job, strategy)
    tp, pp, cp, ep = strategy.tp, strategy.pp, strategy.cp, strategy.ep
    model_parallel = tp * pp * cp
    opt = {n: _option(origin, n) for n in ("gpus", "dp", "tp", "pp", "cp", "ep", "sync")}
    if strategy.dp is None:
        if gpus % model_parallel:
            raise InputError(f"{gpus} GPUs is not a multiple of tp x pp x cp = {tp} x {pp} x {cp} = {model_parallel}",
                             where=opt["gpus"], allowed=f"a multiple of {model_parallel}, or change "
                             + _degrees_text(origin, {"tp": tp, "pp": pp, "cp": cp}))
        dp = gpus // model_parallel
    else:
        dp = strategy.dp
        if dp * model_parallel != gpus:
            named = "--gpus" if origin is None or origin.gpus == "--gpus" else "gpus"
            raise InputError(f"dp x tp x pp x cp = {dp * model_parallel} but {named} is {gpus}", where=opt["dp"],
                             allowed="dp = gpus / (tp pp cp), or leave "
                             + ("--dp" if origin is None else opt["dp"] if origin.named else "dp")
                             + " out to derive it")
    sync = parse_sync(strategy.sync)
    check_backup_workers(sync, gpus, model_parallel, job.max_gpus, opt["sync"])
    if sync.kind == SyncKind.HIER:
        group = sync.param
        if group < 1 or dp % group:
            raise InputError(f"hier group size {group} does not divide dp = {dp}", where=opt["sync"],
                             allowed=f"hier:G with G a divisor of {dp} (G counts data-parallel replicas)")
        shard = getattr(strategy, "shard_group", None)
        if str(strategy.zero).lower() == "hsdp" and shard is not None and shard != min(group, dp):
            # hier:G shards ZeRO/FSDP/HSDP inside its groups (dp_comm.hier_group): the hier group is the shard group
            raise InputError(f"zero hsdp under hier:{group} shards inside the hier groups of {min(group, dp)} "
                             f"replicas, not shard_group = {shard}", where="strategy.shard_group",
                             allowed=f"shard_group unset or {min(group, dp)}, or --sync bsp for HSDP synchronised "
                                     "every step")
    _check_shard_group(strategy, dp)
    _warn_unpriced_fields(job, strategy, origin)
    _check_offload_tensor_layers(job, strategy)  # before the remat policy's own refusal, which names no offload
    _check_titan_op(job, strategy)
    given_etp = strategy.etp
    if ep == 1 and given_etp is not None and not (job.is_transformer and int(job.shape.moe_experts) > 0):
        # Megatron-LM reads --expert-tensor-parallel-size only for expert layers: a dense model ignores it
        _warn_field("strategy.etp",
                    f" = {given_etp} is not priced: the model has no MoE layers (expert tensor "
                    "parallelism applies to experts only)")
        given_etp = None
    etp = given_etp or tp
    # torchtitan's own default is etp 1 (expert_tensor_parallel_degree = 1 "1 means disabled", and no expert TP at all
    # after c4b409af: specs.torchtitan_config._titan_etp); its reader sets it where the TOML gives ep, but an ep from
    # the command line (--ep 8 beside a TOML without expert_parallel_degree) was priced at Megatron's etp = tp
    titan_etp = (given_etp is None and ep > 1
                 and int(LayerImpl.parse(getattr(strategy, "layer_impl", "megatron_te"), "strategy.layer_impl"))
                 in TORCHTITAN_LAYERS)
    if titan_etp:
        etp = 1
    if ep > 1 or given_etp is not None:
        experts = int(job.shape.moe_experts) if job.is_transformer else 0
        stage = tp * cp * dp
        if experts == 0 or stage % (etp * ep) or experts % ep:
            # named where ep and a given etp were written: a --set strategy.etp was refused as "--ep: ..."
            wheres = ([opt["ep"]] if ep > 1 or given_etp is None else []) + (
                [] if given_etp is None else ["strategy.etp" if origin is None else origin.field("etp")])
            if experts == 0:  # was "needs an MoE model whose 0 experts ep divides": the model has none to split
                raise InputError(f"{'--ep' if origin is None else 'ep'} {ep} x etp {etp} needs an MoE model; "
                                 f"{job.name[:80]} has no experts (a dense model)", where=_joined(wheres),
                                 allowed="ep 1 and no etp for a dense model (expert parallelism splits experts)")
            raise InputError(f"{'--ep' if origin is None else 'ep'} {ep} x etp {etp} needs an MoE model whose "
                             f"{experts} experts ep divides and whose tp x cp x dp = {stage} ranks per stage etp x ep "
                             "divides", where=_joined(wheres),
                             allowed="ep dividing the experts, etp x ep dividing tp x cp x dp (MoE parallel folding)")
    if strategy.deepspeed_pipeline and parse_schedule(strategy.schedule).kind != ScheduleKind.ONE_F_ONE_B:
        raise InputError(f"deepspeed_pipeline runs DeepSpeed's TrainSchedule, not {strategy.schedule}",
                         where="strategy.deepspeed_pipeline", allowed="schedule: 1f1b with deepspeed_pipeline")
    if getattr(strategy, "xla_gpu_lhs", False) and not job.is_transformer:
        # the scheduler's window is counted in a transformer layer's kernels (dp_comm.xla_layer_kernels)
        raise InputError("xla_gpu_lhs prices XLA's windows in a transformer layer's kernels; this model has no layers "
                         "of that kind", where="strategy.xla_gpu_lhs",
                         allowed="xla_gpu_lhs: false with a non-transformer workload")
    _check_host_link(job, strategy)
    _check_offload_tensors(job, strategy)
    _check_state_offload(job, strategy, training)
    _check_chunk_layers(strategy)
    _check_stage_layers(job, strategy)
    _check_edge_split(job, strategy)
    _check_moe_a2a_overlap(strategy, ep)
    _check_shared_expert_overlap(job, strategy)
    _check_allgather_dispatcher(job, strategy)
    _check_cp_window(job, strategy, cp, origin)
    _check_topk_sharded(strategy, origin)
    _check_hybridep_group(job, strategy, ep, etp, origin)
    _check_moe_sp(job, strategy, tp, origin)
    _check_defer_embedding_wgrad(strategy, origin)
    _check_moe_rank_imbalance(job, ep)
    _warn_einsum_dispatch_parallel(job, strategy, tp, cp)
    check_mtp_recompute(job, RecomputeMethod.parse(strategy.recompute_method) == RecomputeMethod.UNIFORM
                        and Recompute.parse(strategy.recompute) == Recompute.FULL, strategy.recompute_layers,
                        "strategy.recompute_layers" if origin is None else origin.field("recompute_layers"))
    check_fp8_all_gather(job, bool(getattr(strategy, "fsdp_fp8_all_gather", False)), "strategy.fsdp_fp8_all_gather")
    check_fp8_all_gather(job, bool(getattr(strategy, "fp8_param_gather", False)), "strategy.fp8_param_gather")
    check_fp4_param_gather(job, bool(getattr(strategy, "fp4_param_gather", False)), "strategy.fp4_param_gather")
    micro = training.micro_batch
    global_batch = training.global_batch or dp * micro
    comp = parse_compression(strategy.compression)
    ps = parse_dp_comm(strategy.dp_comm)
    schedule = parse_schedule(strategy.schedule)
    return grid_from_arrays(
        gpus=gpus, dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, micro_batch=micro, global_batch=global_batch,
        schedule=schedule.kind, virtual_stages=schedule.virtual_stages,
        zero=Zero.parse(strategy.zero), recompute=Recompute.parse(strategy.recompute),
        sequence_parallel=strategy.sequence_parallel, overlap=strategy.overlap, compression=comp.kind,
        topk_ratio=comp.topk_ratio, ps_servers=ps.servers, ps_colocated=ps.colocated,
        algorithm=Algorithm.parse(strategy.algorithm),
        dynamic_assignment=Assignment.parse(strategy.assignment) == Assignment.DYNAMIC,
        dispatch_overhead=(GRID_DEFAULTS["dispatch_overhead"] if strategy.dispatch_overhead is None
                           else strategy.dispatch_overhead), bucket_bytes=strategy.bucket_size or 0.0,
        flash_attention=strategy.flash_attention,
        shard_group=strategy.shard_group or 0,
        first_stage_layers=-1 if strategy.first_stage_layers is None else strategy.first_stage_layers,
        last_stage_layers=-1 if strategy.last_stage_layers is None else strategy.last_stage_layers,
        first_chunk_layers=-1 if strategy.first_chunk_layers is None else strategy.first_chunk_layers,
        last_chunk_layers=-1 if strategy.last_chunk_layers is None else strategy.last_chunk_layers,
        stage_split=-1 if getattr(strategy, "stage_layers", None) is None else stage_split_code(strategy.stage_layers),
        etp=given_etp or (1 if titan_etp else 0),
        layout=Layout.parse(strategy.layout),
        recompute_layers=-1 if strategy.recompute_layers is None else strategy.recompute_layers,
        recompute_uniform=RecomputeMethod.parse(strategy.recompute_method) == RecomputeMethod.UNIFORM,
        offload_layers=strategy.offload_layers, tp_comm_overlap=strategy.tp_comm_overlap,
        offload_tensors=sum(1 << OFFLOAD_TENSORS.index(n) for n in set(_offload_tensor_names(strategy))),
        offload_states=StateOffload.parse(getattr(strategy, "offload_states", "none"), "strategy.offload_states"),
        tp_async_allreduce=getattr(strategy, "tp_async_allreduce", True),
        overlap_param_gather=strategy.overlap_param_gather, moe_a2a_overlap=strategy.moe_a2a_overlap,
        moe_shared_expert_overlap=getattr(strategy, "moe_shared_expert_overlap", False),
        moe_shared_expert_stream=getattr(strategy, "moe_shared_expert_stream", False),
        recompute_modules=memory.recompute_modules_code(strategy.recompute_modules),
        moe_layer_host_s=strategy.moe_layer_host_s,
        ep_dispatch_sms=check_ep_dispatch_sms(job, getattr(strategy, "ep_dispatch_sms", None)),
        moe_flex_dispatcher=getattr(strategy, "moe_flex_dispatcher", False),
        moe_allgather_dispatcher=getattr(strategy, "moe_allgather_dispatcher", False),
        moe_flex_backend=FlexBackend.parse(getattr(strategy, "moe_flex_backend", "deepep"),
                                           "strategy.moe_flex_backend"),
        **{name: getattr(strategy, name, GRID_DEFAULTS[name]) for name in _FRAMEWORK_SWITCHES},
        loss_impl=LossImpl.parse(getattr(strategy, "loss_impl", "megatron"), "strategy.loss_impl"),
        layer_impl=LayerImpl.parse(getattr(strategy, "layer_impl", "megatron_te"), "strategy.layer_impl"),
        cp_comm_type=CpCommType.parse(getattr(strategy, "cp_comm_type", "p2p"), "strategy.cp_comm_type"),
        cp_a2a_size=getattr(strategy, "cp_a2a_size", 1),
        **{name: getattr(strategy, name, GRID_DEFAULTS[name]) for name in _KERNEL_SWITCHES},
        train_metric_passes=getattr(strategy, "train_metric_passes", 0),
        train_metric_states=getattr(strategy, "train_metric_states", 0),
        wgrad_deferral_limit=getattr(strategy, "wgrad_deferral_limit", 0))


def held_gpus(sync: str, gpus: Any, model_parallel: Any) -> Any:
    """GPUs a job holds, what its cost charges: the ``gpus`` it trains on and, under backup:B, its B replicas of
    ``model_parallel`` (tp x pp x cp) GPUs beside them, which run every step and whose gradients are dropped (Chen et
    al. 2016: N + b machines; cost/sync.py ``workers_total``). review26f: the cost charged the N alone. Broadcasts."""
    strat = parse_sync(sync)
    return gpus + strat.param * model_parallel if strat.kind == SyncKind.BACKUP else gpus


def check_backup_workers(sync: Any, gpus: int, model_parallel: int | None, max_gpus: int, where: str) -> None:
    """backup:B runs B workers beside the N whose gradients each update takes (Chen et al. 2016; cost/sync.py: N + B
    machines occupied), each a data-parallel replica of tp x pp x cp GPUs: N GPUs + B replicas must fit the cluster
    (fuzz26: backup:100000 on 16 of dgx-h100's 16,384 GPUs priced the 16th fastest of 100,016 workers, 24% faster
    than bsp, on machines the cluster has not). ``model_parallel`` None: not known yet (plan), each worker at least
    one GPU."""
    mp = model_parallel or 1
    if sync.kind != SyncKind.BACKUP or gpus + sync.param * mp <= max_gpus:
        return
    room = max(max_gpus - gpus, 0) // mp
    size = "at least 1 GPU" if model_parallel is None else f"tp x pp x cp = {mp} GPU{'s' if mp > 1 else ''}"
    raise InputError(f"{sync.label()} runs {sync.param:,} backup worker{'s' if sync.param > 1 else ''} of {size} "
                     f"beside the {gpus:,} GPUs: {gpus + sync.param * mp:,} GPUs, more than the cluster's {max_gpus:,}",
                     where=where, allowed=(f"backup:B with B <= {room:,}" if room else
                                           "fewer GPUs (none is left for a backup worker)")
                     + ", or a cluster spec with a larger max_gpus")


def _joined(wheres: list[str]) -> str:
    """Locations joined with " / ", a prefix they share written once ("s.yaml: strategy.ep / strategy.etp", not the
    file twice)."""
    out = wheres[0] if wheres else ""
    for w in wheres[1:]:
        if w == out:
            continue
        cut = os.path.commonprefix([out, w]).rfind(": ")
        out = f"{out} / {w[cut + 2:] if cut > 0 else w}"
    return out


def _check_shard_group(strategy: Any, dp: int) -> None:
    """A pinned HSDP shard group must divide the data-parallel degree (FSDP HYBRID_SHARD's 2-D device mesh is
    replicas x shard group = dp). Given by the user it is an input error, as hier:G with G not dividing dp is;
    a search marks such candidates infeasible instead (step.Infeasible.HSDP_GROUP_INVALID)."""
    shard = getattr(strategy, "shard_group", None)
    if str(strategy.zero).lower() != "hsdp" or shard is None or dp % shard == 0:
        return
    fits = divisors(dp).tolist()
    shown = ", ".join(map(str, fits[:12])) + (", ..." if len(fits) > 12 else "")
    raise InputError(f"zero hsdp shard_group = {shard} does not divide dp = {dp}", where="strategy.shard_group",
                     allowed=f"a divisor of dp = {dp} ({shown}), or shard_group unset (the replicas in one node)")


def published_params_tolerance(published: float) -> float:
    """Relative tolerance of a published parameter count: 5 %, or half a unit in its last written digit where the
    count is rounded more coarsely (7e9, written to 1 B, holds 6.5 to 7.5 B: 7.1 %). 5 %: published counts often
    leave out biases and norms (Narayanan et al. 2021 Table 1 counts 12 l h^2 (1 + 13 / 12h) + (V + s) h: gpt-1.7b's
    full shape, examples/workloads/gpt-1.7b.yaml, is 3.1 % below its 1.7 B)."""
    n = int(round(published))
    unit = 1
    while n and n % 10 == 0:
        n //= 10
        unit *= 10
    return max(0.05, 0.5 * unit / published) if published >= 1 else 0.05


def warn_published_params(workload: Any) -> None:
    """A transformer's ``params`` is the published count, for checking; its shape is what every command prices.
    Round 21: params 1 (or 1e15) beside a 166 M shape was kept without a word. Called on the workload as its file
    gives it (predict, plan, memory, scale, sensitivity and hardware validate without a --set of the model): a --set
    of the shape is a what-if, whose count differs from the file's by design."""
    published = getattr(workload, "params", None)
    if getattr(workload, "kind", "") != "transformer" or not published:
        return
    derived = float(transformer.param_count(transformer_shape(workload)))
    if abs(derived / float(published) - 1.0) > published_params_tolerance(float(published)):
        notices.warn(f"model.params {float(published):.4g} is not the {derived:.4g} parameters the model's shape "
                     "gives (the main model, without MTP modules): the shape is priced; "
                     "correct the shape, or params (the published count, kept for checking)")


def _check_rowwise_workload(recipe: str, sh: Any, workload: Any) -> None:
    """torchao's row-wise recipes are priced on a dense transformer's linear layers (cost.compute.
    rowwise_quantize_bytes): torchao's Float8Linear swaps nn.Linear modules, which MoE experts' grouped GEMMs and
    Mamba mixers' kernels are not, so an MoE, hybrid or generic workload under them is refused, not guessed."""
    if recipe not in ROWWISE_FP8_RECIPES:
        return
    kind = ("a generic workload" if sh is None else "an MoE model" if float(sh.moe_layers) > 0
            else "a hybrid (Mamba) model" if sh.hybrid is not None else "")
    if kind:
        raise InputError(f"fp8 recipe {recipe} is priced for dense transformers (torchao Float8Linear on their "
                         f"nn.Linear layers); {workload.name} is {kind}", where="training.fp8_recipe",
                         allowed=f"a dense transformer, or fp8_recipe {TE_FP8_RECIPES_TEXT}")


def check_mtp_recompute(job: Job, uniform: bool, layers: int | None, where: str) -> None:
    """Refuse full recompute with ``recompute_method`` uniform and a layer count other than 1 on a model with
    multi-token prediction: Megatron-Core checkpoints each MTP module under 'uniform' only after asserting
    ``recompute_num_layers == 1`` ("recompute_num_layers must be 1 for MTP recompute",
    MultiTokenPredictionLayer._checkpointed_forward, NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/transformer/multi_token_prediction.py L1621-1627), so such a run stops at its first step.
    ``uniform``: full recompute with method uniform; ``layers``: the count (None: not given, every layer)."""
    if not (uniform and layers is not None and layers != 1 and job.is_transformer
            and bool(np.any(job.shape.mtp_layers))):
        return
    raise InputError(f"recompute_layers {layers} with recompute_method uniform on a model with "
                     f"{int(np.max(job.shape.mtp_layers))} multi-token prediction layer(s): Megatron-Core asserts "
                     "recompute_num_layers == 1 for MTP recompute (NVIDIA/Megatron-LM@d98e8a64dd "
                     "megatron/core/transformer/multi_token_prediction.py L1621-1627)", where=where,
                     allowed="recompute_layers 1 with recompute_method uniform, or recompute_method block (which "
                             "does not recompute the MTP modules)")


def check_fp8_all_gather(job: Job, on: bool, where: str) -> None:
    """torchao's float8 all-gather casts the weights of Float8Linear modules, which exist only in a float8
    training run (torchtitan applies enable_fsdp_float8_all_gather through its Float8Linear converter), and
    Megatron-Core's --fp8-param-gather needs --fp8-format ("fp8_param must be used together with fp8 mode",
    TransformerConfig.__post_init__): both need precision fp8 and a transformer workload, whose linear layers
    they cast. ``where`` names the field (strategy.fsdp_fp8_all_gather or strategy.fp8_param_gather)."""
    if not on:
        return
    name = where.rpartition(".")[2]
    if Precision.parse(job.precision) != Precision.FP8:
        raise InputError(f"{name} casts the weights of float8 linear layers, but precision is "
                         f"{job.precision}", where=where,
                         allowed=f"--precision fp8, or {name} false")
    if not job.is_transformer:
        raise InputError(f"{name} casts the linear layers of a transformer; workload {job.name} is a "
                         "generic workload", where=where,
                         allowed=f"a transformer workload, or {name} false")
    if job.fp8_recipe in ROWWISE_FP8_RECIPES:
        # torchao's float8 all-gather (WeightWithDynamicFloat8CastTensor) is tensorwise only: torchtitan refuses
        # enable_fsdp_float8_all_gather with a recipe_name; Megatron's FP8 parameters are Transformer Engine's
        # what each flag runs with: torchao's float8 all-gather the tensorwise recipe only, Megatron's
        # fp8_param_gather any Transformer Engine recipe (layer_compute.fp8_params_held, fsdp_fp8_gather)
        recipes = ("tensorwise" if name == "fsdp_fp8_all_gather" else "delayed, tensorwise or mxfp8"
                   if job.accelerator_family == "blackwell" else "delayed, tensorwise or blockwise"
                   if job.accelerator_family == "hopper" else "delayed or tensorwise")
        raise InputError(f"{name} gathers per-tensor FP8 weights; fp8 recipe {job.fp8_recipe} gathers BF16 and "
                         "casts row-wise after the gather", where=where,
                         allowed=f"{name} false, or fp8_recipe {recipes}")


def check_fp4_param_gather(job: Job, on: bool, where: str) -> None:
    """Megatron-Core's --fp4-param-gather needs --fp4-format ("fp4_param must be used together with fp4 mode",
    TransformerConfig.__post_init__, NVIDIA/Megatron-LM@d1410e15e1 transformer_config.py L1317-1318): precision
    fp4 (Transformer Engine's NVFP4BlockScaling) and a transformer workload, whose linear layers hold the NVFP4
    weights. ``where`` names the field. NVFP4 parameters need the recipe's 2D (16 x 16) weight scales: Transformer
    Engine refuses them without (``quantize_master_weights`` -> ``_cast_master_weights_to_nvfp4_2d``: "NVFP4 2D
    quantization must be enabled.", pytorch/tensor/utils.py L607-608, and ``NVFP4TensorStorage._create_columnwise``:
    "Cannot create columnwise data without 2D quantization enabled.", storage/nvfp4_tensor_storage.py L414-415, at
    NVIDIA/TransformerEngine@4220403e8 = v2.16), so training.nvfp4_disable 2d_quantization is refused with it."""
    if not on:
        return
    if Precision.parse(job.precision) == Precision.FP4 and not job.nvfp4_2d_quantization:
        raise InputError("fp4_param_gather holds NVFP4 parameters, which need the recipe's 16 x 16 weight scales, "
                         "but training.nvfp4_disable switches 2d_quantization off (Transformer Engine: \"NVFP4 2D "
                         "quantization must be enabled.\")", where=where,
                         allowed="fp4_param_gather false, or 2d_quantization out of training.nvfp4_disable")
    if Precision.parse(job.precision) != Precision.FP4:
        raise InputError(f"fp4_param_gather holds the linear layers' weights as NVFP4 parameters, but precision is "
                         f"{job.precision}", where=where, allowed="--precision fp4, or fp4_param_gather false")
    if not job.is_transformer:
        raise InputError(f"fp4_param_gather holds the linear layers of a transformer; workload {job.name} is a "
                         "generic workload", where=where, allowed="a transformer workload, or fp4_param_gather false")


def _check_moe_a2a_overlap(strategy: Any, ep: int) -> None:
    """Megatron-Core's own conditions for --overlap-moe-expert-parallel-comm (TransformerConfig.__post_init__,
    megatron/core/transformer/transformer_config.py, NVIDIA/Megatron-LM@d98e8a64dd): expert parallelism, no full
    recompute, no selective recompute of moe ("disable moe in recompute_modules when enabling
    overlap_moe_expert_parallel_comm", the same at @002255075c), and virtual pipeline stages when pp > 1."""
    if not strategy.moe_a2a_overlap:
        return
    allowed = ("ep > 1, recompute none or selective without the module moe, and schedule interleaved:V when pp > 1")
    if ep <= 1:
        raise InputError("moe_a2a_overlap needs expert parallelism", where="strategy.moe_a2a_overlap", allowed=allowed)
    if Recompute.parse(strategy.recompute) == Recompute.FULL:
        raise InputError("moe_a2a_overlap does not run with full recompute", where="strategy.moe_a2a_overlap",
                         allowed=allowed)
    if Recompute.parse(strategy.recompute) == Recompute.SELECTIVE and "moe" in str(
            getattr(strategy, "recompute_modules", "") or "").split(","):
        raise InputError("moe_a2a_overlap does not run with selective recompute of moe",
                         where="strategy.moe_a2a_overlap", allowed=allowed)
    if strategy.pp > 1 and parse_schedule(strategy.schedule).kind != ScheduleKind.INTERLEAVED:
        raise InputError("moe_a2a_overlap with pp > 1 needs the interleaved schedule",
                         where="strategy.moe_a2a_overlap", allowed=allowed)


def _check_shared_expert_overlap(job: Job, strategy: Any) -> None:
    """Megatron-Core's own refusals of --moe-shared-expert-overlap (TransformerConfig.__post_init__,
    NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/transformer_config.py lines 1991-1998: "shared_experts
    recompute cannot work with --moe-shared-expert-overlap", raised only when ``moe_shared_expert_intermediate_size
    is not None``, so a model without shared experts runs both (the overlap does nothing there, and the job warns);
    lines 3039-3041: "disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm", whatever the
    model). And ``moe_shared_expert_stream`` (NeMo Automodel's side stream, docs/model.md#shared-expert-stream)
    with either: two arrangements of the same shared experts (no framework runs both), and the EP overlap's combined
    1F1B, which Automodel does not run, leaves no all-to-all beside them."""
    if getattr(strategy, "moe_shared_expert_stream", False) and (
            getattr(strategy, "moe_shared_expert_overlap", False) or getattr(strategy, "moe_a2a_overlap", False)):
        raise InputError("moe_shared_expert_stream (NeMo Automodel's shared-expert side stream) does not run with "
                         + ("moe_shared_expert_overlap (Megatron-Core's split of the shared experts around the "
                            "all-to-alls)" if getattr(strategy, "moe_shared_expert_overlap", False)
                            else "moe_a2a_overlap (Megatron-Core's combined 1F1B)"),
                         where="strategy.moe_shared_expert_stream",
                         allowed="moe_shared_expert_stream false, or moe_shared_expert_overlap and moe_a2a_overlap "
                                 "false")
    if not getattr(strategy, "moe_shared_expert_overlap", False):
        return
    allowed = "moe_shared_expert_overlap false, or moe_a2a_overlap false and no selective recompute of shared_experts"
    if strategy.moe_a2a_overlap:
        raise InputError("moe_shared_expert_overlap does not run with moe_a2a_overlap (Megatron-Core: 'disable "
                         "moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm')",
                         where="strategy.moe_shared_expert_overlap", allowed=allowed)
    # transformer.recomputed_modules: selective recompute naming shared_experts, in a model that has them
    shared = job.is_transformer and bool(np.any(transformer.recomputed_modules(
        job.shape, Recompute.parse(strategy.recompute),
        memory.recompute_modules_code(str(getattr(strategy, "recompute_modules", "") or ""))).shared_experts))
    if shared:
        raise InputError("moe_shared_expert_overlap does not run with selective recompute of shared_experts "
                         "(Megatron-Core: 'shared_experts recompute cannot work with --moe-shared-expert-overlap')",
                         where="strategy.moe_shared_expert_overlap", allowed=allowed)


def _check_allgather_dispatcher(job: Job, strategy: Any) -> None:
    """Megatron-Core's own refusals beside the allgather dispatcher (``moe_allgather_dispatcher``,
    docs/model.md#ep-allgather): one ``moe_token_dispatcher_type`` names one dispatcher, so not with the flex one;
    "overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher" (TransformerConfig
    .__post_init__, NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/transformer_config.py lines 3016-3019);
    "moe_shared_expert_overlap only works with alltoall or flex token dispatcher" (lines 1820-1826, raised only for a
    model with shared experts)."""
    if not getattr(strategy, "moe_allgather_dispatcher", False):
        return
    allowed = ("moe_allgather_dispatcher false, or moe_flex_dispatcher, moe_a2a_overlap and moe_shared_expert_overlap "
               "off")
    if getattr(strategy, "moe_flex_dispatcher", False):
        raise InputError("moe_allgather_dispatcher and moe_flex_dispatcher name two token dispatchers (Megatron-Core "
                         "runs one: moe_token_dispatcher_type allgather, alltoall or flex)",
                         where="strategy.moe_allgather_dispatcher", allowed=allowed)
    if getattr(strategy, "moe_a2a_overlap", False):
        raise InputError("moe_a2a_overlap does not run with the allgather dispatcher (Megatron-Core: "
                         "'overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher')",
                         where="strategy.moe_allgather_dispatcher", allowed=allowed)
    if getattr(strategy, "moe_shared_expert_overlap", False) and job.is_transformer and float(
            job.shape.moe_shared_experts) > 0:
        raise InputError("moe_shared_expert_overlap does not run with the allgather dispatcher (Megatron-Core: "
                         "'moe_shared_expert_overlap only works with alltoall or flex token dispatcher')",
                         where="strategy.moe_allgather_dispatcher", allowed=allowed)


def topk_refused(compression: Any, zero: Any) -> np.ndarray:
    """Where top-k gradient compression cannot run: under ZeRO 2, ZeRO 3, FSDP or HSDP. Top-k (DGC, Lin et al.,
    ICLR 2018, Algorithm 1) selects from each rank's whole accumulated gradient, keeps the rest as its
    error-feedback residual, and exchanges the kept (value, index) pairs by all-gather (docs/model.md#compression);
    those stages instead reduce-scatter every gradient bucket into shards during the backward (DeepSpeed
    stage_1_and_2.py ``reduce_independent_p_g_buckets_and_remove_grads`` / stage3.py; PyTorch FSDP, whose comm
    hooks for sharded strategies are reduce-scatter hooks writing the rank's shard, torch
    distributed/algorithms/_comm_hooks/default_hooks.py, with only fp16/bf16 casts shipped, LOW_PRECISION_HOOKS),
    and no framework composes a sparse all-gather with them: DeepSpeed's compressed optimizers (1-bit Adam,
    0/1 Adam, 1-bit LAMB) run without ZeRO partitioned gradients and PyTorch's PowerSGD is a DDP hook. ZeRO 1 keeps
    each rank's whole gradient until the step, so top-k's all-gather can stand in for its reduce-scatter (the
    updated shards are still all-gathered after the step). Broadcasts."""
    return np.asarray((np.asarray(compression) == CompressionKind.TOPK) & (np.asarray(zero) >= Zero.GRADIENTS))


def _check_topk_sharded(strategy: Any, origin: Origin | None = None) -> None:
    """predict's refusal of what :func:`topk_refused` finds (the planner marks such candidates infeasible,
    step.Infeasible.TOPK_SHARDED_GRADIENTS), at compression where it was written."""
    comp = parse_compression(strategy.compression)
    zero = Zero.parse(str(strategy.zero), "strategy.zero")
    if not bool(np.any(topk_refused(int(comp.kind), int(zero)))):
        return
    raise InputError(f"top-k compression ({comp.label}) all-gathers each rank's whole sparsified gradient, which "
                     f"zero {zero.label} reduce-scatters to shards instead",
                     where="strategy.compression" if origin is None else origin.field("compression"),
                     allowed="compression topk with zero 0 or 1, or compression none, fp16, bf16 or int8 with "
                             "zero 2, 3, fsdp or hsdp")


def cp_window_refused(job: Job, cp: Any, cp_comm_type: Any, cp_a2a_size: Any, layer_impl: Any) -> np.ndarray:
    """Where Transformer Engine refuses the candidate's context parallelism: a model with sliding-window layers
    (``Shape.local_layer_fraction`` > 0) under a p2p ring of more than one rank, cp_comm_type p2p at cp > 1 or
    a2a+p2p with P = cp / cp_a2a_size > 1 (TE falls back to a2a when the p2p group has one rank). Megatron-Core
    hands TE each window layer's window (TEDotProductAttention.__init__, ``extra_kwargs["window_size"] =
    config.window_size`` where ``is_layer_window_attention``, megatron/core/extensions/transformer_engine.py lines
    2163-2171 at NVIDIA/Megatron-LM@d98e8a64dd) and TE asserts, whatever the sequence length,
    NVIDIA/TransformerEngine@d0067d0 transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py
    ``attn_forward_func_with_cp`` lines 5054-5060::

        sliding_window_attn = (window_size is not None and window_size != (-1, 0) and window_size != (-1, -1))
        assert not sliding_window_attn or cp_comm_type in ["a2a", "all_gather"], \
            f"Context parallelism does not support sliding window attention with {cp_comm_type=}!"

    after its a2a+p2p fallbacks (lines 5020-5032); the backend filter agrees (dot_product_attention/utils.py
    ``get_attention_backend`` lines 1261-1271: FusedAttention disabled for a window with cp_comm_type p2p or
    a2a+p2p). all_gather and a2a run a window (AttnFuncWithCPAndKVAllGather, AttnFuncWithCPAndQKVOA2A). Only the
    Transformer Engine layer (``layer_impl`` megatron_te) is checked: the refusal is TE's. Broadcasts."""
    if not job.is_transformer or not float(np.max(job.shape.local_layer_fraction)) > 0:
        return np.zeros(np.broadcast_shapes(np.shape(cp), np.shape(cp_comm_type)), dtype=bool)
    kind = np.asarray(cp_comm_type)
    ring = compute.cp_levels(cp, kind, cp_a2a_size)[1]
    te = np.asarray(layer_impl) == LayerImpl.MEGATRON_TE
    # a2a+p2p whose cp_a2a_size does not divide cp is no hierarchy Megatron-Core builds (its a2a group size must
    # divide cp; step.Infeasible.HEADS_NOT_DIVISIBLE says so): its fractional "ring" of cp / cp_a2a_size ranks was
    # refused here as "a p2p ring of 1 ranks" (4 // 3)
    formed = (kind != CpCommType.A2A_P2P) | (np.asarray(cp) % np.maximum(np.asarray(cp_a2a_size), 1) == 0)
    return np.asarray((np.asarray(cp) > 1) & ((kind == CpCommType.P2P) | (kind == CpCommType.A2A_P2P)) & (ring > 1)
                      & te & formed, dtype=bool)


def hybridep_group_refused(job: Job, ep: Any, etp: Any, flex: Any, backend: Any) -> np.ndarray:
    """Where HybridEP refuses the flex dispatcher's group: its ``etp x ep`` ranks (Megatron-Core's tp_ep_group,
    docs/model.md#ep-hierarchical) not divisible by the group's ranks in one NVLink domain. deepseek-ai/DeepEP
    hybrid-ep @7febc6e2 deep_ep/hybrid_ep_buffer.py ``HybridEPBuffer.__init__`` L74-77 (the same at @94a9f8f L75)::

        assert (self.group_size % self.num_of_hybrid_ep_ranks_per_nvlink_domain == 0), ...

    with the ranks per domain the group's ranks it detects in its NVLink domain (``detect_accessible_ranks``) or
    ``NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN``; here the group's placement's ``c_0`` (etp x ep consecutive ranks),
    the count the model prices the dispatch with. Only for ``flex`` with ``backend`` hybridep (DeepEP's own
    kernels price such a group, cost.ep_dispatch.hierarchical_bytes). Broadcasts."""
    flex = np.asarray(flex, dtype=bool)
    hyb = flex & (np.asarray(backend) == int(FlexBackend.HYBRIDEP))
    if not np.any(hyb):
        return np.zeros(hyb.shape, dtype=bool)
    p = np.asarray(ep, dtype=float) * np.asarray(etp, dtype=float)
    per_domain = np.maximum(place(p, 1.0, job.network).c[0], 1.0)
    return np.asarray(hyb & (p > 1) & (np.mod(p, per_domain) != 0), dtype=bool)


def moe_sp_refused(job: Job, tp: Any, sequence_parallel: Any, layer_impl: Any) -> np.ndarray:
    """Where Megatron-Core refuses to train the candidate: an MoE model (``Shape.moe_experts`` > 0) with tensor
    parallelism and sequence parallelism off. ``MoELayer.forward``, NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/transformer/moe/moe_layer.py lines 636-640::

        if self.training and self.attn_tp_group.size() > 1 and not self.config.sequence_parallel:
            raise ValueError(
                "During training, performance may degrade if MoE and tensor parallelism"
                "are enabled without also enabling sequence parallelism.")

    (the attention TP group: ``tp``, whatever etp; since 28c8dd71f0, 2024-05, on
    ``tensor_model_parallel_size``, and before it megatron/training/arguments.py asserted "When using MoE and
    tensor parallelism, sequence parallelism must be used", aed469faaa, 2024-01). Only Megatron-Core's layer
    (``layer_impl`` megatron_te) is checked: megatron_legacy also stands for Megatron-DeepSpeed, whose DeepSpeed MoE
    has no Megatron sequence parallelism to require, and torchtitan, eager, llmfoundry and xla layers run MoE with
    TP without it (docs/model.md#tp-comm-moe prices the block all-reduce they keep). Broadcasts."""
    shape = np.broadcast_shapes(np.shape(tp), np.shape(sequence_parallel), np.shape(layer_impl))
    if not job.is_transformer or int(job.shape.moe_experts) <= 0:
        return np.zeros(shape, dtype=bool)
    return np.asarray(np.broadcast_to((np.asarray(tp) > 1) & ~np.asarray(sequence_parallel, dtype=bool)
                                      & (np.asarray(layer_impl) == LayerImpl.MEGATRON_TE), shape), dtype=bool)


def resolve_sequence_parallel(job: Job, strategy: Any) -> Any:
    """``strategy`` with an unset ``sequence_parallel`` (None) made what the layout's framework runs: on where
    :func:`moe_sp_refused` would refuse it off (an MoE model at tp > 1 under Megatron-Core's layer, whose only
    trainable choice is SP on), with a notice; off everywhere else (Megatron-LM's --sequence-parallel is a store_true
    switch, default off; megatron/training/arguments.py), but on under layer_impl torchtitan at tp > 1 (torchtitan's
    default). A value given (true or false) is kept: false where Megatron
    refuses it is refused by :func:`_check_moe_sp`. docs/model.md#moe-sp-required."""
    if getattr(strategy, "sequence_parallel", False) is not None:
        return strategy
    impl = LayerImpl.parse(getattr(strategy, "layer_impl", "megatron_te"), "strategy.layer_impl")
    tp = int(strategy.tp)
    need = bool(np.any(moe_sp_refused(job, tp, False, int(impl))))
    # torchtitan's TP plan is sequence-parallel unless switched off (apply_tp: SequenceParallel norms, Shard(1)
    # row-parallel outputs, torchtitan@e7c0cae parallelize_llama.py; parallelism.enable_sequence_parallel defaults
    # true @b5bcd76c66), as its TOML reader already reads it
    titan = int(impl) in TORCHTITAN_LAYERS and tp > 1
    if need and job.accelerator_family == "tpu":
        # ux36: a TPU program is compiled by XLA whatever layer_impl names (model_parallel_comm._xla_partitioned), so
        # Megatron-Core's MoELayer rule was the wrong reason; SP on is what MaxText runs there (the residual stream's
        # embed sharded over 'tensor': base.yml logical_axis_rules ['activation_embed', 'tensor'], docs/model.md
        # #jax-remat-tp), and the pricing is unchanged
        _warn_field("strategy.sequence_parallel",
                    f" is unset: priced on at tp {tp}, the activations sharded over the tensor axis as MaxText "
                    "shards a TPU program's residual stream (logical_axis_rules ['activation_embed', 'tensor'])")
    elif need:
        _warn_field("strategy.sequence_parallel",
                    f" is unset: priced on, the only choice Megatron-Core trains an MoE "
                    f"model at tp {tp} with (MoELayer.forward raises without it; a Megatron-LM launch needs "
                    "--sequence-parallel); set it, or another layer_impl, to price something else")
    elif titan:
        _warn_field("strategy.sequence_parallel",
                    f" is unset: priced on, as torchtitan runs tensor parallelism at tp {tp} "
                    "(parallelism.enable_sequence_parallel defaults true); set it false to price without")
    return strategy.model_copy(update={"sequence_parallel": need or titan})


def defer_embedding_wgrad_refusal(pp: int, grad_accumulation_fusion: bool, pp_at: str = "",
                                  fusion_at: str = "") -> tuple[str, str] | None:
    """(what was wrong, what is allowed) where Megatron-Core's ModelParallelConfig.__post_init__ raises ValueError for
    defer_embedding_wgrad_compute (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/model_parallel_config.py L545-553): at
    pp 1 ("Cannot defer embedding wgrad compute when pipeline model parallel is not used": no pipelined schedule
    drains the deferred output-layer GEMMs, docs/model.md#defer-embedding-wgrad) and with grad_accumulation_fusion
    false ("... when gradient accumulation fusion is not used"); None where it runs. ``pp_at`` / ``fusion_at``: where
    the other field was written, named in the message (a Megatron-LM launch's flag).

    The one rule for every route: predict's check of the strategy (:func:`_check_defer_embedding_wgrad`, a launch's
    --defer-embedding-wgrad-compute read into the field by specs.megatron_args) and plan's pins (engine.planner.pins
    keeps the search to pp >= 2 and refuses the fusion pair). ux38: the launch's flags were refused by a second copy
    of the rule in the reader."""
    if pp == 1:
        return (f"true at pp 1{pp_at}: Megatron-Core raises \"Cannot defer embedding wgrad compute when pipeline "
                "model parallel is not used\" (model_parallel_config.py L545-548 at d98e8a64dd)",
                "defer_embedding_wgrad: true with pp 2 or more; false (the default) at pp 1")
    if not grad_accumulation_fusion:
        return (f"true with grad_accumulation_fusion false{fusion_at}: Megatron-Core raises \"Cannot defer embedding "
                "wgrad compute when gradient accumulation fusion is not used\" (model_parallel_config.py L550-553 at "
                "d98e8a64dd)", "defer_embedding_wgrad: true with grad_accumulation_fusion true (the default), or false")
    return None


def _check_defer_embedding_wgrad(strategy: Any, origin: Origin | None = None) -> None:
    """Refuse defer_embedding_wgrad where Megatron-Core raises (:func:`defer_embedding_wgrad_refusal`), at the field
    where it was written: a Megatron-LM launch's --defer-embedding-wgrad-compute, a file's field, --set; the other
    field (pp, grad_accumulation_fusion) named as written (``--pipeline-model-parallel-size``,
    ``--no-gradient-accumulation-fusion``). A launch without --pipeline-model-parallel-size runs Megatron's pp 1,
    the spec's default: refused here too, unless the command line sets pp (a what-if over the launch, as --pp over
    its --pipeline-model-parallel-size 1). At pp 1 the field was accepted and priced nothing (ux37)."""
    if not getattr(strategy, "defer_embedding_wgrad", False):
        return
    named = dict(origin.named) if origin is not None else {}
    why = defer_embedding_wgrad_refusal(int(strategy.pp), bool(getattr(strategy, "grad_accumulation_fusion", True)),
                                        *(f" ({named[n].rsplit(': ', 1)[-1]})" if n in named else ""
                                          for n in ("pp", "grad_accumulation_fusion")))
    if why is not None:
        raise InputError(why[0], where="strategy.defer_embedding_wgrad" if origin is None
                         else origin.field("defer_embedding_wgrad"), allowed=why[1])


def _check_moe_sp(job: Job, strategy: Any, tp: int, origin: Origin | None = None) -> None:
    """predict's refusal of what :func:`moe_sp_refused` finds (the planner marks such candidates infeasible,
    step.Infeasible.MOE_SP_REQUIRED), at sequence_parallel: only a false that was given reaches it (an unset value
    was resolved on by :func:`resolve_sequence_parallel`)."""
    impl = LayerImpl.parse(getattr(strategy, "layer_impl", "megatron_te"), "strategy.layer_impl")
    sp = bool(strategy.sequence_parallel)
    if not bool(np.any(moe_sp_refused(job, tp, sp, int(impl)))):
        return
    where = "strategy.sequence_parallel" if origin is None else origin.field("sequence_parallel")
    raise InputError(f"Megatron-Core refuses to train an MoE model ({int(job.shape.moe_experts)} experts) at tp {tp} "
                     "with sequence_parallel false (MoELayer.forward raises ValueError, Megatron-LM d98e8a64dd "
                     "moe_layer.py)", where=where,
                     allowed="sequence_parallel true or unset (priced on) with tp > 1, or tp 1, or a layer_impl "
                             "other than megatron_te")


def check_moe_rank_imbalance(factor: float | None, experts: float, top_k: float, ep: int | None) -> None:
    """Refuse a stated max / mean routed copies per EP rank (training.moe_rank_imbalance) that no routing reaches.
    Top-k routing sends a token's k copies to k distinct experts, so one rank of E / ep experts receives at most
    min(k, E / ep) copies of each of the T tokens, against a mean of T k / ep:

        max / mean <= ep min(k, E / ep) / k = min(ep, E / k)

    (``ep`` None: the bound over every ep, E / k). A factor above it (100 at ep 8 on Mixtral's E 8, k 2: bound 4)
    priced the busiest rank's expert GEMMs and EP bytes at more than the whole batch's routed copies, without a word.
    Under drop-and-pad (training.moe_pad_to_capacity) the factor is the capacity factor: callers pass ep None, the
    bound E / k (a capacity of every token), at every ep.
    Raises InputError at training.moe_rank_imbalance."""
    if not factor or experts <= 0 or top_k <= 0 or (ep is not None and ep <= 1):
        return
    # the copies cap the step prices at (moe_routing.copy_load_cap); ep None: its value at ep = E, E / k
    bound = float(moe_routing.copy_load_cap(experts, top_k, experts if ep is None else ep))
    if factor <= bound * (1.0 + 1e-9):
        return
    at = "" if ep is None else f" at ep {ep}"
    # round 17: at :g, 4.0000001 read "moe_rank_imbalance 4 exceeds ... <= 4" and the bound 8/3 showed as 2.66667,
    # which was itself refused ("2.66667 exceeds ... = 2.66667"); 10 digits show the factor and a bound that is taken
    raise InputError(f"moe_rank_imbalance {factor:.10g} exceeds what top-k routing can reach{at}: a rank of E / ep "
                     f"experts receives at most min(k, E / ep) copies of a token against a mean of k / ep, so max / "
                     f"mean <= min(ep, E / k) = {bound:.10g} (E {experts:g}, k {top_k:g})",
                     where="training.moe_rank_imbalance",
                     allowed=f"a measured max / mean between 1 and {bound:.10g}{at}, or unset (the expected maximum "
                             "of uniform random routing)")


def _check_moe_rank_imbalance(job: Job, ep: int) -> None:
    """:func:`check_moe_rank_imbalance` at the strategy's ep; a factor at ep 1, where it prices nothing
    (layer_compute.moe_rank_load is 1 there), is said; under drop-and-pad the capacity factor, priced at every ep,
    is checked against E / k."""
    f = float(job.moe_rank_imbalance)
    E, k = (float(job.shape.moe_experts), float(job.shape.moe_top_k)) if job.is_transformer else (0.0, 0.0)
    if not f or E <= 0 or k <= 0:
        return  # unset, or no MoE layers (_warn_unpriced_fields says so)
    if job.moe_pad_to_capacity:  # the capacity factor: priced at every ep (layer_compute.moe_rank_load)
        check_moe_rank_imbalance(f, E, k, None)
        return
    if ep <= 1:
        _warn_field("training.moe_rank_imbalance",
                    f" = {f:g} is not priced: ep is 1 (every rank holds every expert, "
                    "so no EP rank is busier than the mean)")
    check_moe_rank_imbalance(f, E, k, ep)


def _warn_einsum_dispatch_parallel(job: Job, strategy: Any, tp: int, cp: int) -> None:
    """XLA's drop-and-pad (training.moe_pad_to_capacity on layer_impl xla: the einsum dispatch,
    docs/model.md#maxtext-dropping-moe) at cp > 1, which is said: MaxText's ``dense_matmul`` keeps the dispatched
    buffers off the context axis (``dispatch_axis`` has no ``activation_length``), so every context rank runs the
    experts on the whole sequence's capacity rows, and the partitioner sums the dispatch (forward) and the experts'
    output gradient (backward) over the context shards; priced: the einsums on s / cp rows, the experts on the rank's
    s / cp rows, none of the context collectives. At tp > 1 the combine mask's gradient all-reduce is priced
    (model_parallel_comm.einsum_mask_allreduce_bytes)."""
    if not (job.moe_pad_to_capacity and job.is_transformer and float(job.shape.moe_experts) > 0):
        return
    if LayerImpl.parse(getattr(strategy, "layer_impl", "megatron_te"), "strategy.layer_impl") != LayerImpl.XLA:
        return
    if cp > 1:
        _warn_field("training.moe_pad_to_capacity",
                    f" = true on layer_impl xla (the einsum dispatch) at cp {cp}: MaxText keeps the dispatched "
                    "buffers whole over the context axis, so each context rank runs the experts on the whole "
                    "sequence's capacity rows and the partitioner sums the dispatch and the experts' output gradient "
                    "over the context shards; priced on the rank's s / cp rows without those sums "
                    "(docs/model.md#maxtext-dropping-moe)")


def _check_hybridep_group(job: Job, strategy: Any, ep: int, etp: int, origin: Origin | None = None) -> None:
    """predict's refusal of what :func:`hybridep_group_refused` finds (the planner marks such candidates infeasible,
    step.Infeasible.HYBRIDEP_GROUP_INVALID), at ep where it was written."""
    if not getattr(strategy, "moe_flex_dispatcher", False) or ep * etp <= 1:
        return
    backend = FlexBackend.parse(getattr(strategy, "moe_flex_backend", "deepep"), "strategy.moe_flex_backend")
    if not bool(np.any(hybridep_group_refused(job, ep, etp, True, int(backend)))):
        return
    per_domain = int(np.asarray(place(float(ep * etp), 1.0, job.network).c[0]).ravel()[0])
    where = "strategy.ep" if origin is None else origin.field("ep")
    raise InputError(f"HybridEP refuses a flex dispatcher group of ep {ep} x etp {etp} = {ep * etp} ranks with "
                     f"{per_domain} of them per NVLink domain of {job.cluster_name} (the group must be whole domains)",
                     where=where,
                     allowed="ep x etp a multiple of the ranks per NVLink domain, or at most one domain, or "
                             "moe_flex_backend deepep (DeepEP hybrid-ep deep_ep/hybrid_ep_buffer.py at 7febc6e2 "
                             "asserts group_size % ranks per domain == 0)")


def _check_cp_window(job: Job, strategy: Any, cp: int, origin: Origin | None = None) -> None:
    """predict's refusal of what :func:`cp_window_refused` finds (the planner marks such candidates infeasible,
    step.Infeasible.CP_WINDOW_UNSUPPORTED), at cp_comm_type where it was written, else at cp where that was written
    in a file or scenario (``origin``): a scenario's ``strategy: {cp: 2}`` was refused as "strategy.cp_comm_type",
    naming neither the scenario nor a field it holds."""
    kind = CpCommType.parse(getattr(strategy, "cp_comm_type", "p2p"), "strategy.cp_comm_type")
    a2a = getattr(strategy, "cp_a2a_size", 1)
    impl = LayerImpl.parse(getattr(strategy, "layer_impl", "megatron_te"), "strategy.layer_impl")
    if not bool(np.any(cp_window_refused(job, cp, int(kind), a2a, int(impl)))):
        return
    ring = f" (a p2p ring of cp / cp_a2a_size = {cp // max(int(a2a), 1)} ranks)" if kind == CpCommType.A2A_P2P else ""
    named = dict(origin.named) if origin is not None else {}
    where = ("strategy.cp_comm_type" if origin is None else
             origin.field("cp" if "cp" in named and "cp_comm_type" not in named else "cp_comm_type"))
    raise InputError(f"Transformer Engine refuses sliding-window attention (workload sliding_window "
                     f"{int(job.shape.sliding_window)}) with cp_comm_type {kind.label} at cp {cp}{ring}",
                     where=where,
                     allowed="cp_comm_type a2a or all_gather with a sliding-window model, or cp 1 "
                             "(TE context_parallel.py attn_forward_func_with_cp at d0067d0)")


#: The dense-block-only recompute sets and the block each prices: titan_op (torchtitan's op-level selective AC,
#: cost.transformer.titan_op_gemms: its mm order, and so which GEMMs the policy saves), jax_qkvo (MaxText's
#: save_dot_except_mlp / _mlpwi, cost.transformer.mlp_up_flops: the names MaxText's MoE, MLA and parallel blocks
#: tag differ) and jax_qkv (save_qkv_proj, cost.transformer.out_proj_flops: the same names).
DENSE_ONLY_RECOMPUTE = {"titan_op": "torchtitan's op policy on a dense block (wq, wk, wv, wo, w1, w3, w2)",
                        "jax_qkvo": "MaxText's save_dot_except_mlp(wi) on a dense block (query_proj, key_proj, "
                                    "value_proj, out_proj, mlpwi_0/1, mlpwo), or beside moe on MoE layers",
                        "jax_qkv": "MaxText's save_qkv_proj on a dense block (query_proj, key_proj, value_proj, "
                                   "out_proj, mlpwi_0/1, mlpwo), or beside moe on MoE layers"}


def _check_titan_op(job: Job, strategy: Any) -> None:
    """recompute_modules titan_op, jax_qkvo or jax_qkv (:data:`DENSE_ONLY_RECOMPUTE`) is priced for a dense block with
    separate Q, K, V projections; which tensors the policy saves is not derived for MoE layers, MLA, a parallel
    block or a hybrid layer pattern (cost.memory charges the policy's saved set to every block call, so a Mamba-2 or
    MLP-only layer would keep Q, K and V it does not have); a non-transformer model has no layers to price. jax_qkvo
    and jax_qkv take MoE layers when ``moe`` is named with them: MaxText's policy then names nothing inside the MoE
    block (mlpwi_0, mlpwi_1, mlpwo 'remat'), so the backward recomputes the block whole (router, dispatch, experts),
    which is recompute_modules moe's price (docs/model.md#offload, the Mixtral counterpart)."""
    names = str(getattr(strategy, "recompute_modules", "") or "").split(",")
    if "jax_qkvo" in names and "jax_qkv" in names:
        raise InputError("recompute_modules names jax_qkvo and jax_qkv: two MaxText remat policies, one keeping the "
                         "output projection's output and one recomputing it", where="strategy.recompute_modules",
                         allowed="jax_qkvo (save_dot_except_mlp) or jax_qkv (save_qkv_proj), not both")
    if "jax_context" in names and not {"jax_qkvo", "jax_qkv"} & set(names):
        raise InputError("recompute_modules names jax_context without jax_qkvo or jax_qkv: it marks MaxText's "
                         "'context' (the attention kernel's output and residuals) kept beside one of those policies' "
                         "saved names", where="strategy.recompute_modules",
                         allowed="jax_context beside jax_qkvo or jax_qkv (e.g. 'jax_qkv,jax_context')")
    for name, block in DENSE_ONLY_RECOMPUTE.items():
        if name not in names:
            continue
        sh = job.shape if job.is_transformer else None
        whole_moe = name in ("jax_qkvo", "jax_qkv") and "moe" in names  # the MoE block recomputed whole
        what = ("a generic model (no transformer layers)" if sh is None
                else "MoE layers" + (f" (with {name}, name moe too: MaxText's policy recomputes the MoE block whole "
                                     "when it names nothing in it)" if name != "titan_op" else "")
                if int(sh.moe_experts) > 0 and not whole_moe
                else "multi-head latent attention" if int(sh.kv_lora_rank) > 0
                else "a parallel attention/MLP block" if bool(sh.parallel_block)
                else "a hybrid layer pattern (Mamba-2, attention-only and MLP-only layers)" if sh.hybrid is not None
                else "")
        if what:
            raise InputError(f"{name} prices {block}; the model has {what}", where="strategy.recompute_modules",
                             allowed=f"{name} with a dense transformer; core_attn, mla_up_proj, moe_act, moe or "
                                     "jax_dots otherwise")


def _check_edge_reach(job: Job, strategy: Any) -> None:
    """Pinned first/last stage (or model-chunk) layers that no pipeline plan searches can take, refused at the pin:
    :func:`_check_edge_split`'s rule (Megatron-Core's TransformerConfig: the stages between the given edges share the
    rest, at least one layer each; at pp 2 with both edges given, first + last = L) at the fewest parts the search
    tries, where more parts only ask more of the rest. The search keeps a pinned stage count to pp >= 2 and a chunk
    count to interleaved:V >= 2 (planner.PIPELINE_SWITCHES), so the fewest parts are the pinned pp (else 2) times
    the pinned V (else 2) for chunks. With pp pinned (and V, for chunks) the parts are those, and predict's own
    refusal (:func:`_check_edge_split`) is given. fuzz39: ``first_stage_layers 33`` of 32 layers with pp searched was
    searched (1,482,624 candidates) and every one called layers_not_divisible, exit 0, the pin unnamed."""
    if not job.is_transformer or (job.shape.hybrid is not None and int(job.shape.hybrid.segments) > 1):
        return
    if all(any(getattr(strategy, f"{e}_{k}_layers", None) is not None for e in ("first", "last"))
           for k in ("stage", "chunk")):
        # _check_chunk_layers' refusal (its schedule rule is the search's: planner.PIPELINE_SWITCHES); fuzz39: plan
        # searched both pinned to no plan, exit 0
        raise InputError("first/last_chunk_layers and first/last_stage_layers are both set",
                         where="strategy.first_chunk_layers", allowed="one way of splitting the layers")
    layers = int(job.shape.layers)
    pp = int(strategy.pp)
    sch = parse_schedule(strategy.schedule)
    v = sch.virtual_stages if sch.kind == ScheduleKind.INTERLEAVED else 0
    for kind in ("stage", "chunk"):
        first, last = getattr(strategy, f"first_{kind}_layers", None), getattr(strategy, f"last_{kind}_layers", None)
        given = [n for n in (first, last) if n is not None]
        if not given:
            continue
        if pp >= 2 and (kind == "stage" or v >= 2):
            _check_edge_split(job, strategy)  # the parts are pinned: predict's refusal, in its words
            return
        parts = (pp if pp >= 2 else 2) * ((v if v >= 2 else 2) if kind == "chunk" else 1)
        mid = parts - len(given)
        rest = layers - sum(given)
        if rest >= mid:
            continue
        name = f"first_{kind}_layers" if first is not None else f"last_{kind}_layers"
        taken = " + ".join(f"{e} {n}" for e, n in (("first", first), ("last", last)) if n is not None)
        searched = (f"pp {pp}" if pp >= 2 else "pp 2 or more") + (
            "" if kind == "stage" else f" and interleaved {f'V {v}' if v >= 2 else 'V 2 or more'}")
        what = "stages" if kind == "stage" else "model chunks"
        total = taken if len(given) == 1 else f"{taken} = {sum(given)}"
        said = (f"{total} layers, more than the model's {layers}" if rest < 0 else
                f"{total} of the model's {layers} layers leaves {rest} for the {mid} other "
                f"{what[:-1] if mid == 1 else what}")
        raise InputError(f"{said}: plan searches {searched}, so {parts} {what} at the fewest, each other one at least "
                         "1 layer", where=f"strategy.{name}",
                         allowed=f"first/last {kind} layers summing to at most {layers - mid} (the other {what} at "
                                 f"least 1 layer each), or leave {name} out")


#: The strategy checks that no parallel degree lifts (the model's or the cluster's rule on a field), with the field
#: each refuses at: plan runs them on its pinned fields (engine.planner.run), as predict does on its strategy.
#: The stage / chunk layer counts' check (:func:`_check_edge_reach`) is plan's only: predict prices one pipeline,
#: refused by :func:`_check_edge_split`.
PIN_CHECKS: tuple[tuple[str, Callable[[Job, Any], None]], ...] = (
    ("recompute_modules", _check_titan_op), ("offload_layers", _check_host_link),
    *((n, _check_edge_reach) for n in OTHER_SPLITS))


def _warn_field(path: str, text: str) -> None:
    """A warning about the spec field ``path`` (``strategy.etp``), named as :func:`notices.field_name` writes it for
    the input in hand (flat in a measured-runs file), then ``text``."""
    notices.warn(notices.field_name(path) + text)


def warn_unpriced_jax_release(job: Job, layer_impl: Any) -> None:
    """A warning for training.jax_release on a run that no XLA compiles: the release picks the XLA SPMD partitioner
    that places an XLA program's tensor-parallel collectives (specs.training.xla_later_partitioner, priced only by
    model_parallel_comm._xla_partitioned runs: strategy.layer_impl xla or a TPU), so on a GPU run of any other
    layer_impl (Megatron-Core's, torchtitan's, ...) it priced nothing without a word (ux37, fuzz37's corpus). A
    warning, not a refusal, as for every field that qualifies what the run does not do (no framework reads it).
    Predict's strategy and plan's pinned (else default) layer_impl both call it."""
    if job.jax_release and job.accelerator_family != "tpu" and int(layer_impl) != int(LayerImpl.XLA):
        _warn_field("training.jax_release",
                    f" = {job.jax_release} is not priced: it picks the XLA SPMD partitioner of an XLA program "
                    f"(layer_impl xla, or a TPU), and this run is {LayerImpl.of(layer_impl).label} on "
                    f"{job.accelerator_family}")


def warn_unfused_attention(job: Job, flash_attention: bool) -> None:
    """A warning for the fused-kernel settings (training.attention_kernel other than gemm, training.cudnn_release) of
    a run without flash_attention: its core runs as two GEMMs on the GEMM curve (cost.compute), so they were priced
    nothing without a word. With flash_attention on, the warning that the release is priced on another held
    release's curve (``attention_release_note``) instead: it was raised where the job was built, so a run without
    the fused kernel was told both that the curve prices its core and that nothing does. A strategy (predict, memory,
    scale, sensitivity, calibrate) and plan's flash_attention (pinned, else on) both call it."""
    if flash_attention:
        if job.attention_release_note:
            _warn_field("training.cudnn_release", job.attention_release_note)
        return
    for path, v in job.attention_given:
        if (path, v) != ("training.attention_kernel", "gemm"):
            _warn_field(path, f" = {v} is not priced: flash_attention is off (the attention core runs as two GEMMs, "
                              "not a fused kernel)")


def _warn_unpriced_accumulation_fusion(strategy: Any, zero: Zero) -> None:
    """A warning for grad_accumulation_fusion false where it prices nothing: the extra add into main_grad is
    Megatron-Core DDP's backward hook (layer_compute.grad_accumulation_time: megatron_ddp at ZeRO 0/1) or NeMo 1's
    O2 hook (main_grad_hook)."""
    if getattr(strategy, "grad_accumulation_fusion", True) or getattr(strategy, "main_grad_hook", False):
        return  # NeMo 1's O2 hook (main_grad_hook) adds it too; StrategySpec refuses that hook at zero 3 / fsdp
    why = [w for w, bad in (("megatron_ddp is off", not getattr(strategy, "megatron_ddp", False)),
                            (f"zero is {getattr(strategy, 'zero', '0')}", zero > Zero.OPTIMIZER)) if bad]
    if why:
        _warn_field("strategy.grad_accumulation_fusion", " = false is not priced: it adds each weight gradient into "
                    f"Megatron-Core DDP's main_grad buffer, and {', '.join(why)}")


def _warn_unpriced_alignment(strategy: Any, zero: Zero) -> None:
    """A warning for align_grad_reduce / align_param_gather false where they price nothing: they act only on the
    interleaved schedule's per-chunk sync under Megatron-Core's DDP with overlap (dp_comm.interleaved_dp_sync:
    megatron_ddp at ZeRO 0/1, overlap, interleaved with pp > 1), align_param_gather also only on ZeRO-1's gathers
    with overlap_param_gather (docs/model.md#interleaved-dp-sync). A launch's --no-align-grad-reduce /
    --no-align-param-gather on a 1F1B run (Megatron-LM sets align_param_gather false itself without interleaving)
    was dropped without a word."""
    grad = not getattr(strategy, "align_grad_reduce", True)
    gather = not getattr(strategy, "align_param_gather", True)
    opt_step = bool(getattr(strategy, "overlap_param_gather_with_optimizer_step", False))
    if not (grad or gather or opt_step):
        return
    schedule = parse_schedule(getattr(strategy, "schedule", "1f1b"))
    why = [w for w, bad in (
        ("megatron_ddp is off", not getattr(strategy, "megatron_ddp", False)),
        ("overlap is off", not getattr(strategy, "overlap", True)),
        (f"the schedule is {schedule.label}", schedule.kind != ScheduleKind.INTERLEAVED),
        ("pp is 1", int(getattr(strategy, "pp", 1) or 1) <= 1)) if bad]
    what = "the interleaved schedule's per-chunk data-parallel sync under Megatron-Core's DDP with overlap"
    if grad and why:
        _warn_field("strategy.align_grad_reduce", f" = false is not priced: it times {what}, and {', '.join(why)}")
    if gather:
        why_ag = why + [w for w, bad in (
            ("overlap_param_gather is off (the gathers are exposed whole)",
             not getattr(strategy, "overlap_param_gather", False)),
            (f"zero is {getattr(strategy, 'zero', '0')} (no distributed-optimizer parameter all-gather)",
             zero != Zero.OPTIMIZER)) if bad]
        if why_ag:
            _warn_field("strategy.align_param_gather",
                        f" = false is not priced: it times the ZeRO-1 parameter gathers "
                        f"of {what}, and {', '.join(why_ag)}")
    why_opt = why + [w for w, bad in (
        ("overlap_param_gather is off", not getattr(strategy, "overlap_param_gather", False)),
        (f"zero is {getattr(strategy, 'zero', '0')} (no distributed-optimizer parameter all-gather)",
         zero != Zero.OPTIMIZER)) if bad]
    if opt_step and why_opt:
        # Megatron-LM refuses the switch without the distributed optimizer's overlapped gather and interleaving
        # (docs/model.md#optimizer-step-gather); the model prices it only there
        _warn_field("strategy.overlap_param_gather_with_optimizer_step",
                    f" = true is not priced: it moves the first model chunk's ZeRO-1 parameter gather into the "
                    f"optimizer step and unbuckets that chunk in {what}, and {', '.join(why_opt)}")


def _warn_unpriced_fields(job: Job, strategy: Any, origin: Origin | None = None) -> None:
    """A warning (not silence) for strategy fields this model gives nothing to act on: moe_layer_host_s,
    moe_host_attention_graphed without a host floor (MoE layers and moe_layer_host_s > 0), ep_dispatch_sms,
    moe_flex_dispatcher and moe_shared_expert_overlap (also at ep 1; the latter also without
    shared experts), moe_flex_backend hybridep without moe_flex_dispatcher, and recompute_modules moe_act or moe
    without MoE layers, moe_fp8_padding without MoE layers or fp8, moe_permute_fusion false without MoE layers or
    with the HybridEP flex backend, mla_up_proj without multi-head latent
    attention, mla_column_down_proj without it or at tp 1 or without sequence_parallel, layernorm without a norm of
    its own (MoE layers or MLA), mlp without dense MLP layers,
    shared_experts without shared experts, shard_group without HSDP; ep_dispatch_sms without moe_a2a_overlap,
    tp_async_allreduce false with tp 1 or sequence_parallel, training.fp8_attention on a model without
    sliding-window layers, training.moe_rank_imbalance without MoE layers (at ep 1:
    :func:`_check_moe_rank_imbalance`); the eager layer ops without
    what they act on; hybrid.mtp_pattern without MTP layers; cp_comm_type other than p2p at cp 1 and cp_a2a_size
    without a2a+p2p; dispatch_overhead > 0 under static assignment; align_grad_reduce / align_param_gather false
    outside the interleaved per-chunk sync (:func:`_warn_unpriced_alignment`). ``origin``: where the fields were
    written; moe_allgather_dispatcher, moe_permute_fusion and moe_fp8_padding that a Megatron-LM file's reader set
    as Megatron's defaults (--num-experts without --moe-token-dispatcher-type; --moe-* flags without
    --moe-permute-fusion; --fp8-format with --num-experts and --moe-grouped-gemm; marked as defaults,
    errors.Origin.is_default) are not warned about: the file chose none of them, and at etp x ep 1 Megatron's own
    dispatcher does nothing either, nor its expert padding without fp8 or experts."""
    moe = job.is_transformer and int(job.shape.moe_experts) > 0
    chosen = not (origin is not None and origin.is_default("moe_allgather_dispatcher"))
    mla = job.is_transformer and int(job.shape.kv_lora_rank) > 0
    if float(getattr(strategy, "moe_layer_host_s", 0.0) or 0.0) > 0 and not moe:
        _warn_field("strategy.moe_layer_host_s",
                    f" = {strategy.moe_layer_host_s:g} s is not priced: the model has no "
                    "MoE layers")
    if getattr(strategy, "moe_host_attention_graphed", False) and not (
            moe and float(getattr(strategy, "moe_layer_host_s", 0.0) or 0.0) > 0):
        _warn_field("strategy.moe_host_attention_graphed",
                    " is not priced: it acts on the host floor of MoE layers (moe_layer_host_s > 0)")
    if getattr(strategy, "ep_dispatch_sms", None) is not None and not moe:
        _warn_field("strategy.ep_dispatch_sms",
                    f" = {strategy.ep_dispatch_sms} is not priced: the model has no MoE "
                    "layers")
    elif getattr(strategy, "ep_dispatch_sms", None) is not None and not (
            getattr(strategy, "moe_a2a_overlap", False) or (
                (getattr(strategy, "moe_shared_expert_overlap", False)
                 or getattr(strategy, "moe_shared_expert_stream", False)) and float(job.shape.moe_shared_experts) > 0
                and int(getattr(strategy, "ep", 1)) > 1)):
        # the dispatcher's SMs slow only the compute that hides EP all-to-alls
        # (model_parallel_comm._with_moe_a2a_overlap, model_parallel_comm._with_shared_expert_overlap, which hides
        # nothing without shared experts or at ep 1)
        _warn_field("strategy.ep_dispatch_sms",
                    f" = {strategy.ep_dispatch_sms} is not priced: the dispatcher's SMs slow "
                    "only the compute that hides the expert-parallel all-to-alls, and moe_a2a_overlap is off")
    if getattr(strategy, "moe_shared_expert_overlap", False) and not (
            moe and float(job.shape.moe_shared_experts) > 0):
        # Megatron-Core: "Only effective when moe-shared-expert-intermediate-size is set"
        _warn_field("strategy.moe_shared_expert_overlap", " is not priced: the model has no shared experts")
    elif getattr(strategy, "moe_shared_expert_overlap", False) and int(getattr(strategy, "ep", 1)) == 1:
        _warn_field("strategy.moe_shared_expert_overlap",
                    " is not priced: ep is 1 (no expert-parallel all-to-all for "
                    "the shared experts to run beside)")
    if getattr(strategy, "moe_shared_expert_stream", False) and not (
            moe and float(job.shape.moe_shared_experts) > 0):
        _warn_field("strategy.moe_shared_expert_stream", " is not priced: the model has no shared experts")
    elif getattr(strategy, "moe_shared_expert_stream", False) and int(getattr(strategy, "ep", 1)) == 1:
        _warn_field("strategy.moe_shared_expert_stream",
                    " is not priced: ep is 1 (no expert-parallel all-to-all for the shared experts to run beside)")
    if getattr(strategy, "moe_flex_dispatcher", False) and not moe:
        _warn_field("strategy.moe_flex_dispatcher", " is not priced: the model has no MoE layers")
    elif getattr(strategy, "moe_flex_dispatcher", False) and int(getattr(strategy, "ep", 1)) == 1:
        # the flex dispatcher replaces the expert-parallel all-to-all (model_parallel_comm._mp_collectives), which ep 1
        # has none of
        _warn_field("strategy.moe_flex_dispatcher",
                    " is not priced: ep is 1 (no expert-parallel all-to-all to "
                    "dispatch)")
    if getattr(strategy, "bucket_size", None) and getattr(strategy, "nanotron_trainer", False) and Zero.parse(
            strategy.zero) == Zero.OPTIMIZER and job.grad_bytes > job.elem_bytes:
        # dp_comm._bucket_bytes: nanotron's ZeRO-1 with fp32 accumulation all-reduces its whole buffer in one call
        _warn_field("strategy.bucket_size",
                    f" = {strategy.bucket_size:g} B is not priced: nanotron_trainer at zero 1 "
                    "with fp32 gradient accumulation builds no DDP buckets (one all-reduce of the whole fp32 gradient "
                    "buffer after the last backward)")
    if getattr(strategy, "bucket_size", None) and getattr(strategy, "deepspeed_pipeline", False) and (
            Zero.parse(strategy.zero) == Zero.NONE or (
                Zero.parse(strategy.zero) == Zero.OPTIMIZER and job.grad_bytes > job.elem_bytes
                and Precision.parse(job.precision) == Precision.BF16)):
        # dp_comm.deepspeed_pipeline_fixed_buckets: the PipelineEngine passes its own 5e8-element buckets (review17f)
        _warn_field("strategy.bucket_size",
                    f" = {strategy.bucket_size:g} B is not priced: DeepSpeed's PipelineEngine all-reduces the "
                    "gradients in buckets of MEMORY_OPT_ALLREDUCE_SIZE (5e8 elements) there, not reduce_bucket_size")
    if getattr(strategy, "pp_scatter_gather", False) and getattr(strategy, "deepspeed_pipeline", False):
        # model_parallel_comm.pp_send_divisor / deepspeed_pipe_comm: the PipelineEngine partitions and gathers in its
        # own way
        _warn_field("strategy.pp_scatter_gather",
                    " is not priced: deepspeed_pipeline partitions the pipeline tensors over TP itself "
                    "(PartitionedTensor, docs/model.md#pp-comm)")
    elif getattr(strategy, "pp_scatter_gather", False) and getattr(strategy, "nanotron_trainer", False):
        # nanotron's PipelineBlock sends the tensor as it is (model_parallel_comm.pp_send_divisor): no framework runs
        # both
        _warn_field("strategy.pp_scatter_gather",
                    " is priced as legacy Megatron-LM's split and all-gather, which nanotron_trainer does not do "
                    "(PipelineBlock.forward sends each rank's tensor as it is, docs/model.md#pp-comm)")
    elif getattr(strategy, "pp_scatter_gather", False) and int(getattr(strategy, "cp", 1) or 1) > 1:
        # the scatter/gather went with the pipeline's move into Megatron-Core (3c92fa93b5, 2023-03-23); context
        # parallelism came to Megatron-Core later (parallel_state.py, 80590f9894, 2023-08-09)
        _warn_field("strategy.pp_scatter_gather",
                    f" with cp {int(strategy.cp)} describes no Megatron release: legacy Megatron-LM's scatter/gather "
                    "went with the pipeline's move into Megatron-Core (2023-03), before context parallelism came "
                    "(2023-08); priced as asked (docs/model.md#pp-comm)")
    p2p_unpriceable = (parse_schedule(getattr(strategy, "schedule", "1f1b")).kind != ScheduleKind.INTERLEAVED
                       or int(getattr(strategy, "pp", 1) or 1) <= 1 or getattr(strategy, "deepspeed_pipeline", False))
    if getattr(strategy, "overlap_p2p_comm", False) and p2p_unpriceable:
        # model_parallel_comm.pp_overlap: Megatron-Core's 1F1B schedule refuses overlap_p2p_comm
        # (schedules.py forward_backward_pipelining_without_interleaving, d98e8a64dd lines 2181-2184)
        _warn_field("strategy.overlap_p2p_comm",
                    " is not priced: it overlaps the sends of Megatron-Core's interleaved schedule, and the run has "
                    "pp 1, a schedule other than interleaved:V, or deepspeed_pipeline (docs/model.md#pp-comm-overlap)")
    if not getattr(strategy, "overlap_p2p_send_wait", True) and (
            not getattr(strategy, "overlap_p2p_comm", False) or p2p_unpriceable
            or (getattr(strategy, "moe_a2a_overlap", False) and int(getattr(strategy, "ep", 1) or 1) > 1)):
        # pp_overlap: the field only says which of overlap_p2p_comm's steady sends hide; the EP overlap's combined
        # 1F1B hides none
        _warn_field("strategy.overlap_p2p_send_wait",
                    " is not priced: it says which of overlap_p2p_comm's steady-phase sends hide, and the run hides "
                    "none (overlap_p2p_comm off or not priced, or moe_a2a_overlap's combined 1F1B; "
                    "docs/model.md#pp-comm-overlap)")
    if getattr(strategy, "moe_allgather_dispatcher", False) and chosen and not moe:
        _warn_field("strategy.moe_allgather_dispatcher", " is not priced: the model has no MoE layers")
    elif getattr(strategy, "moe_allgather_dispatcher", False) and chosen and int(getattr(strategy, "ep", 1)) * int(
            getattr(strategy, "etp", None) or getattr(strategy, "tp", 1) or 1) == 1:
        # MoEAllGatherTokenDispatcher gathers only when tp_size > 1 or ep_size > 1 (its expert TP and EP)
        _warn_field("strategy.moe_allgather_dispatcher", " is not priced: etp x ep is 1 (nothing to gather)")
    backend = str(getattr(strategy, "moe_flex_backend", "deepep") or "deepep")
    if backend != FlexBackend.DEEPEP.label and not getattr(strategy, "moe_flex_dispatcher", False):
        # the backend's bytes and default SMs act only where the flex dispatcher runs
        # (model_parallel_comm._mp_collectives)
        _warn_field("strategy.moe_flex_backend",
                    f" = {backend} is not priced: moe_flex_dispatcher is off (the "
                    "expert-parallel tokens move with NCCL's all-to-all)")
    if getattr(strategy, "eager_rope", False) and not (job.is_transformer and bool(job.shape.rope)):
        _warn_field("strategy.eager_rope", " is not priced: it needs rotary position embeddings")
    if getattr(strategy, "mla_column_down_proj", False):
        # model_parallel_comm._mp_collectives tp_att: MLA's gathers with sequence parallelism at tp > 1 only (without
        # SP the count's all-reduce stays: docs/model.md#mla-tp)
        tp_mla = int(getattr(strategy, "tp", 1))
        why = ("it needs multi-head latent attention" if not mla else "tp is 1 (no tensor-parallel gathers)"
               if tp_mla == 1 else None if getattr(strategy, "sequence_parallel", False) else
               "it prices the all-gathers of sequence_parallel, which is off (docs/model.md#mla-tp)")
        if why:
            _warn_field("strategy.mla_column_down_proj", " is not priced: " + why)
    for name, need, what in (("eager_glu_clamp", moe and bool(job.shape.gated_mlp), "MoE layers with a gated MLP"),
                             ("eager_expert_bias", moe, "MoE layers"),
                             ("eager_bias_dropout_add", job.is_transformer
                              and bool(np.any(job.shape.biases) or np.any(job.shape.dropout)),
                              "transformer layers with linear biases or dropout")):
        if getattr(strategy, name, False) and not need:
            _warn_field(f"strategy.{name}", f" is not priced: the model has no {what}")
    if job.is_transformer and bool(np.any(job.shape.mtp_shared)) and not bool(np.any(job.shape.mtp_layers)):
        notices.warn("model.mtp_shared is not priced: mtp_layers is 0 (no multi-token prediction module to share)")
    if job.is_transformer and job.shape.mtp_block and not bool(np.any(job.shape.mtp_layers)):
        notices.warn(f"model.hybrid.mtp_pattern {job.shape.mtp_block!r} is not priced: mtp_layers is 0 (no "
                     "multi-token prediction module)")
    # the context-parallel exchange (docs/model.md#cp-comm) acts only at cp > 1, and cp_a2a_size only under a2a+p2p;
    # either was dropped without a word
    cp_comm = str(getattr(strategy, "cp_comm_type", "p2p"))
    if cp_comm != "p2p" and int(getattr(strategy, "cp", 1)) == 1:
        _warn_field("strategy.cp_comm_type", f" = {cp_comm} is not priced: cp is 1 (no context-parallel exchange)")
    a2a = int(getattr(strategy, "cp_a2a_size", 1))
    if a2a != 1 and cp_comm != "a2a+p2p":
        _warn_field("strategy.cp_a2a_size",
                    f" = {a2a} is not used: it sizes the all-to-all groups of cp_comm_type "
                    f"a2a+p2p, and cp_comm_type is {cp_comm}")
    overhead = getattr(strategy, "dispatch_overhead", None)
    if overhead and Assignment.parse(getattr(strategy, "assignment", "static")) != Assignment.DYNAMIC:
        # round 16: the scheduling time per dynamically pulled micro-batch (cost.balance) was dropped without a word
        # under static assignment (a plan row written back carries 0 there, and is not warned)
        _warn_field("strategy.dispatch_overhead",
                    f" = {float(overhead):g} s is not priced: it is the scheduling time of "
                    "each micro-batch pulled from a shared queue, and assignment is static (give --assignment "
                    "dynamic)")
    if getattr(strategy, "train_metric_passes", 0) and not job.is_transformer:
        _warn_field("strategy.train_metric_passes",
                    " is not priced: the model has no transformer output layer (logits)")
    warn_unpriced_jax_release(job, LayerImpl.parse(getattr(strategy, "layer_impl", "megatron_te"),
                                                   "strategy.layer_impl"))
    limit = int(getattr(strategy, "wgrad_deferral_limit", 0) or 0)
    if limit and not getattr(strategy, "defer_embedding_wgrad", False):
        # ux37: Megatron-Core reads wgrad_deferral_limit only under defer_embedding_wgrad_compute (layers.py
        # LinearWithGradAccumulationAndAsyncCommunication, 3c0f3ef38c L384-385: the cap on grad_output_buffer, which
        # exists only with the switch); no error there (model_parallel_config.py checks the limit only with the
        # switch on), so a warning here as for every other field that qualifies one that is off
        _warn_field("strategy.wgrad_deferral_limit",
                    f" = {limit} is not priced: it caps the micro-batches whose output-layer weight-gradient GEMMs "
                    "defer_embedding_wgrad defers, and defer_embedding_wgrad is off")
    warn_unfused_attention(job, bool(getattr(strategy, "flash_attention", True)))
    tp = int(getattr(strategy, "tp", 1))
    if not getattr(strategy, "tp_async_allreduce", True) and (tp == 1 or getattr(strategy, "sequence_parallel", False)):
        _warn_field("strategy.tp_async_allreduce", " = false is not priced: " + (
            "tp is 1 (no tensor-parallel collectives)" if tp == 1 else
            "with sequence_parallel the backward reduce-scatters run under the weight-gradient GEMMs either way "
            "(Megatron launches them async)"))
    if getattr(strategy, "sequence_parallel", None) and tp == 1:
        # round 17: echoed as on without a word; Megatron-LM turns it off at tp 1 ("Disabling sequence parallelism
        # because tensor model parallelism is disabled", megatron/training/arguments.py L1430-1439 at d98e8a64dd)
        _warn_field("strategy.sequence_parallel", " = true is not priced: tp is 1 (no tensor-parallel ranks to split "
                    "the sequence over; Megatron-LM turns it off)")
    if (job.fp8_attention and not (job.is_transformer and int(job.shape.sliding_window) > 0)
            and not compute.has_fp8_attention_ratios(job.accelerator)
            and job.fp8_recipe not in compute.FP8_ATTENTION_CS_RECIPES):
        # the FP8 core is priced on the 16-bit curve, x its measured FP8 / BF16 time where one is (docs/model.md);
        # under current scaling its Q, K, V and dO casts are priced anyway (docs/model.md#fp8-attention-casts)
        _warn_field("training.fp8_attention",
                    f" = true is not priced: it prices the FP8 backward of sliding-window layers "
                    f"(docs/model.md#fp8-attention), and the model has none, and the FP8 core's measured time over "
                    f"the BF16 core's (docs/model.md#fp8-attention-rate), which {job.accelerator} has none of")
    if job.moe_rank_imbalance and not moe:  # at ep 1, or above what a rank can take: _check_moe_rank_imbalance
        _warn_field("training.moe_rank_imbalance", " is not priced: the model has no MoE layers")
    if job.moe_pad_to_capacity and not moe:
        _warn_field("training.moe_pad_to_capacity", " = true is not priced: the model has no MoE layers")
    if job.moe_routing != "random" and not moe:
        _warn_field("training.moe_routing", f" = {job.moe_routing} is not priced: the model has no MoE layers")
    if job.router_bytes and not moe:  # round 17: dropped without a word (the router's dtype needs a router)
        _warn_field("training.moe_router_dtype",
                    f" = {'fp64' if job.router_bytes == 8 else 'fp32'} is not priced: the model has no MoE layers")
    # a reader's default (Megatron-LM's experts pad fp8 tokens where --fp8-format, --num-experts and
    # --moe-grouped-gemm meet: megatron_args._moe_fp8_padding) is not the user's choice: a --precision bf16 or a dense
    # --model over that launch was told about a field it never wrote, as moe_permute_fusion was (review19a)
    padding = getattr(strategy, "moe_fp8_padding", False) and not (
        origin is not None and origin.is_default("moe_fp8_padding"))
    if padding and not (moe and job.fp8_recipe):
        _warn_field("strategy.moe_fp8_padding",
                    " is not priced: it needs MoE layers and precision fp8 (the experts "
                    "pad their tokens for the FP8 grouped GEMM only)")
    # a reader's default (Megatron-LM's unfused permute for a launch of --moe-* flags without --moe-permute-fusion,
    # round 18: a dense launch with --moe-router-dtype was told about a field it never wrote) is not the user's choice
    unfused = not getattr(strategy, "moe_permute_fusion", True) and not (
        origin is not None and origin.is_default("moe_permute_fusion"))
    if unfused and not moe:
        _warn_field("strategy.moe_permute_fusion", " = false is not priced: the model has no MoE layers")
    elif (unfused and getattr(strategy, "moe_flex_dispatcher", False)
          and str(getattr(strategy, "moe_flex_backend", "deepep")) == "hybridep"):
        _warn_field("strategy.moe_permute_fusion", " = false is not priced: HybridEP permutes the tokens in its "
                    "own kernel whatever Megatron-Core's moe_permute_fusion says")
    names = set(filter(None, str(getattr(strategy, "recompute_modules", "") or "").split(",")))
    for name, present, what in (("moe_act", moe, "MoE layers"), ("moe", moe, "MoE layers"),
                                ("mla_up_proj", mla, "multi-head latent attention"),
                                ("layernorm", (moe or mla) and not bool(job.shape.parallel_block),
                                 "norm that is a module of its own (Transformer Engine fuses the others into "
                                 "LayerNormLinear; Megatron-Core recomputes those of MoE layers and MLA, and has no "
                                 "parallel attention + MLP block)"),
                                ("mlp", job.is_transformer and float(job.shape.mlp_layers) > 0
                                 and not bool(job.shape.parallel_block),
                                 "dense MLP layer of its own (Megatron-Core recomputes the MLP of layers that are "
                                 "not MoE layers, and has no parallel attention + MLP block)"),
                                ("shared_experts", moe and float(job.shape.moe_shared_experts) > 0,
                                 "shared experts")):
        if name in names and not present:
            _warn_field("strategy.recompute_modules", f" {name} recomputes nothing: the model has no {what}")
    zero = Zero.parse(getattr(strategy, "zero", "0"))
    if getattr(strategy, "overlap_param_gather", False) and not (
            zero in (Zero.OPTIMIZER, Zero.GRADIENTS) and getattr(strategy, "overlap", True)):
        _warn_field("strategy.overlap_param_gather",
                    f" = true is not priced: it moves the ZeRO-1/2 (distributed "
                    f"optimizer) parameter all-gather under the next forward, with overlap on, and zero is "
                    f"{strategy.zero}{'' if getattr(strategy, 'overlap', True) else ', overlap off'} (Megatron-LM "
                    "asserts --use-distributed-optimizer for --overlap-param-gather)")
    _warn_unpriced_alignment(strategy, zero)
    _warn_unpriced_accumulation_fusion(strategy, zero)
    if getattr(strategy, "tp_comm_overlap", False) and not (
            int(getattr(strategy, "tp", 1)) > 1 and getattr(strategy, "sequence_parallel", False)):
        _warn_field("strategy.tp_comm_overlap",
                    f" = true is not priced: it overlaps the tensor-parallel collectives "
                    f"of sequence parallelism, and tp is {strategy.tp}"
                    f"{'' if strategy.sequence_parallel else ' without sequence_parallel'} (Megatron-LM asserts "
                    "--sequence-parallel for --tp-comm-overlap)")
    elif getattr(strategy, "tp_comm_overlap", False):
        # model_parallel_comm.userbuffers_on: XLA's partitioner places the TP collectives, no Transformer Engine linear
        where = ("the accelerator is a TPU" if job.accelerator_family == "tpu" else "layer_impl is xla"
                 if LayerImpl.parse(getattr(strategy, "layer_impl", "megatron_te"), "strategy.layer_impl")
                 == LayerImpl.XLA else "xla_gpu_lhs is true" if getattr(strategy, "xla_gpu_lhs", False) else "")
        if where:
            _warn_field("strategy.tp_comm_overlap",
                        f" = true is not priced: it is Transformer Engine's userbuffers overlap of its linears' "
                        f"collectives, and {where} (a program XLA compiles: its partitioner places and schedules the "
                        "TP collectives; priced as without it)")
    # tp_comm_overlap's parts (docs/model.md#tp-comm-parts): each acts only where the userbuffers overlap is priced
    parts_off = [name for name in TP_COMM_PARTS if not getattr(strategy, name, True)]
    if parts_off and not (getattr(strategy, "tp_comm_overlap", False) and int(getattr(strategy, "tp", 1)) > 1
                          and getattr(strategy, "sequence_parallel", False)):
        for name in parts_off:
            _warn_field(f"strategy.{name}", " = false is not priced: it switches off a part of tp_comm_overlap's "
                        "userbuffers overlap, which needs tp_comm_overlap with sequence_parallel at tp > 1")
    if not getattr(strategy, "fp8_wgrad", True) and job.fp8_recipe != "delayed":
        got = f"fp8_recipe is {job.fp8_recipe}" if job.fp8_recipe else "the run is not fp8"
        _warn_field("strategy.fp8_wgrad", f" = false is not priced: {got} (Megatron-Core hands fp8_wgrad to "
                    "Transformer Engine's DelayedScaling only, megatron/core/fp8_utils.py)")
    if getattr(strategy, "eager_activation", False) and not (
            job.is_transformer and float(job.shape.mlp_layers) > 0
            and bool(np.any(compute.eager_activation_priced(job.shape)))):
        why = ("the model has no dense MLP layers" if job.is_transformer and float(job.shape.mlp_layers) == 0
               else "its activation is eager either way (GeLU without linear biases, squared ReLU)"
               if job.is_transformer else "the model is not a transformer")
        _warn_field("strategy.eager_activation", f" is not priced: {why}; the routed experts' eager activation is "
                    "not priced")
    elif getattr(strategy, "eager_activation", False) and float(job.shape.moe_layers) > 0:
        # compute.eager_activation_bytes: the dense MLP blocks only (docs/model.md#eager-activation)
        _warn_field("strategy.eager_activation", " is priced in the dense MLP layers only: the routed experts' eager "
                    "activation (TEGroupedMLP's glu and fp32 probability multiply) is not priced")
    shard = getattr(strategy, "shard_group", None)
    if shard is not None and str(getattr(strategy, "zero", "")).lower() != "hsdp":
        _warn_field("strategy.shard_group",
                    f" = {shard} is not used: it sizes HSDP's sharding groups, and zero is "
                    f"{strategy.zero} (give --zero hsdp)")

