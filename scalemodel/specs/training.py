"""Training settings and parallelism/synchronisation strategy specs."""


from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args

import numpy as np
from msgspec import Meta

from scalemodel.choices import (
    ROWWISE_FP8_FAMILIES,
    ROWWISE_FP8_RECIPES,
    TE_FP8_RECIPES_TEXT,
    Algorithm,
    Assignment,
    Choice,
    CompressionKind,
    CpCommType,
    FlexBackend,
    Fp8Recipe,
    LayerImpl,
    Layout,
    LossImpl,
    Optimizer,
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
from scalemodel.errors import InputError
from scalemodel.specs import base
from scalemodel.specs.accelerator import CUDNN_VERSION_PATTERN, cudnn_release_key
from scalemodel.specs.base import MAX_SPEC_INT, Before, Spec, field_error
from scalemodel.specs.quantities import Bytes, Count, SecondsOrZero


def _labels(cls: type[Choice]) -> Meta:
    return Meta(extra_json_schema={"x-schema": {"enum": cls.labels(), "type": "string"}})


class _Vocabulary:
    """What a text field's parser allows, in its own words (what it says of a word it does not know), for the type
    check's refusal of a value that is not text: ``schedule: null`` (a YAML key left empty) or ``--set
    strategy.sync=5`` was "Input should be a valid string (got None); a string" (fuzz29), naming no schedule."""

    def __init__(self, parse: Callable[[str], str]) -> None:
        self.parse = parse

    def __str__(self) -> str:
        try:
            self.parse("")
        except InputError as exc:
            return exc.allowed
        return "a string"


def _text(parse: Callable[[str], str]) -> Before:
    """A text field's canonical form (after its type: anything but text is left to the type check, whose refusal
    says what the parser allows)."""
    return Before(lambda v: parse(v) if isinstance(v, str) else v, _Vocabulary(parse))


#: recompute_modules' words (a list, or text the pattern refuses, was answered "a string matching
#: ^([a-z_]+(,[a-z_]+)*)?$": the regular expression, not the names)
_MODULES = Before(allowed=("module names, comma-separated in one string: core_attn, mla_up_proj, moe_act, moe, "
                           "layernorm, mlp, shared_experts, jax_dots, jax_qkvo, jax_qkv, jax_context or titan_op (e.g. "
                           "'core_attn,moe_act')"))


def _release_text(v: object) -> object:
    """A cuDNN release written as a bare number (YAML / --set read 9.19 as a float) as its text; 9.10 reads as 9.1,
    which the engine then refuses with the releases held (docs/model.md#cudnn-release: quote it, '9.10'). Text that
    ends in a line break is refused here: the field's pattern ends in ``$``, which Python's re (msgspec's patterns)
    matches before a final newline, so '9.19\n' passed and was priced as 9.19 (review 15a)."""
    if isinstance(v, str) and v.endswith("\n"):
        raise ValueError(f"String is not of the allowed form (got {v!r})")
    return repr(v) if isinstance(v, float) else v


#: a JAX release as pip names it, major.minor.patch without leading zeros (training.jax_release)
JAX_RELEASE_PATTERN = r"^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$"
#: the first release whose SPMD partitioner gathers the narrower operand of a weight-gradient dot: 0.4.28 measured the
#: earlier, 0.4.29 the later (scripts/measure_xla_backward_gathers.py; docs/model.md#xlabwd36, #xlaver36)
JAX_LATER_PARTITIONER_FIRST = (0, 4, 29)
_JAX_TEXT = Before(_release_text, "a JAX release as major.minor.patch text without leading zeros, e.g. '0.4.23'")


#: a Megatron-Core release, major.minor or major.minor.patch without leading zeros (training.megatron_core_release)
MCORE_RELEASE_PATTERN = r"^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})(\.(0|[1-9][0-9]{0,2}))?$"


def _mcore_release_text(v: object) -> object:
    """A Megatron-Core release must be text: a bare number is refused, not read (YAML and --set read 0.20 as the
    float 0.2, which is release 0.2 as well: no reading of a float is safe, so none is taken); text as
    :func:`_release_text` takes it."""
    if isinstance(v, float):
        raise ValueError(f"a bare number is not a release (got {v!r}; 0.20 reads as 0.2): quote it, e.g. '0.20'")
    return _release_text(v)


_MCORE_TEXT = Before(_mcore_release_text, (
    "a Megatron-Core release as quoted major.minor or major.minor.patch text without leading zeros, e.g. '0.14' or "
    "'0.16.1' (a bare 0.20 is the number 0.2: refused)"))


_RELEASE_NUMBER_AS_TEXT = Before(_release_text, (
    "a cuDNN release as major.minor or major.minor.patch text without leading zeros, e.g. '9.19' or '9.21.1' (quote "
    "it: a bare 9.10 reads as 9.1)"))


# Text fields holding one of a choice's labels, validated and normalised by choices.py.
TrainPrecision = Annotated[str, Before(Precision.normalize), _labels(Precision)]
ZeroText = Annotated[str, Before(Zero.normalize), _labels(Zero)]
RecomputeText = Annotated[str, Before(Recompute.normalize), _labels(Recompute)]
AssignmentText = Annotated[str, Before(Assignment.normalize), _labels(Assignment)]
OptimizerText = Annotated[str, Before(Optimizer.normalize), _labels(Optimizer)]
LayoutText = Annotated[str, Before(Layout.normalize), _labels(Layout)]
RecomputeMethodText = Annotated[str, Before(RecomputeMethod.normalize), _labels(RecomputeMethod)]
Fp8RecipeText = Annotated[str, Before(Fp8Recipe.normalize), _labels(Fp8Recipe)]
LossImplText = Annotated[str, Before(LossImpl.normalize), _labels(LossImpl)]
LayerImplText = Annotated[str, Before(LayerImpl.normalize), _labels(LayerImpl)]
CpCommTypeText = Annotated[str, Before(CpCommType.normalize), _labels(CpCommType)]
FlexBackendText = Annotated[str, Before(FlexBackend.normalize), _labels(FlexBackend)]
StateOffloadText = Annotated[str, Before(StateOffload.normalize), _labels(StateOffload)]

# Text fields kept in their canonical spelling (the label of what they parse to).
_SEQUENCE_LENGTHS = _text(lambda v: parse_sequence_lengths(v).label)
_SCHEDULE = _text(lambda v: parse_schedule(v).label)
_SYNC = _text(lambda v: parse_sync(v, where="").label())
_ALGORITHM = _text(Algorithm.normalize)
_COMPRESSION = _text(lambda v: parse_compression(v).label)
_DP_COMM = _text(lambda v: parse_dp_comm(v).label)


#: The gradient element's range in bytes: one bit (1-bit Adam's sign) to fp64. Outside it nothing is reduced:
#: 1e300 overflowed the memory model ("memory_time: a byte count is negative or not finite", naming no field) and
#: 1e-300 priced the data-parallel traffic as free.
MIN_GRAD_BYTES, MAX_GRAD_BYTES = 0.125, 8.0
#: The most optimizer-state bytes per parameter taken: 8 fp64 values (Adam's fp32 master, m and v are 12); 1e300
#: overflowed the memory model as grad_bytes_per_param did.
MAX_OPTIMIZER_BYTES = 64.0
#: The most training-metric passes over the logits taken per micro-batch (strategy train_metric_passes): a trainer
#: evaluates a handful of metrics; a huge count overflowed nothing but priced nonsense.
MAX_TRAIN_METRIC_PASSES = 64
#: The largest wgrad_deferral_limit taken (strategy wgrad_deferral_limit): Megatron-Core counts deferred micro-batches
#: in a Python list; a step holds far fewer micro-batches than this.
MAX_WGRAD_DEFERRAL_LIMIT = 1_000_000
#: The most metric states synchronised over all ranks once a step taken (strategy train_metric_states): a handful of
#: metrics with a few states each; a huge count priced nonsense.
MAX_TRAIN_METRIC_STATES = 256


#: A module's GEMM precision in a low-precision run (training.module_precision): bf16 (the module left out of the
#: run's FP8 / FP4 recipe) or mxfp8 (MXFP8BlockScaling, Blackwell). Transformer Engine's per-module quantization
#: config (Megatron-Core ``quant_recipe``, TEQuantizationParams: ``training_recipe: {}`` = BF16, or
#: ``fp8_quantization_recipe: "mxfp8"``); docs/model.md#module-precision.
#: MaxText's remat tensor names (src/MaxText/configs/base.yml at 92e59fdf5, remat_policy custom) a strategy may offload
#: (strategy offload_tensors): per token of a layer, decoder_layer_input and out_proj are h wide (h / tp under
#: sequence parallelism), query_proj heads x head_dim, key_proj and value_proj kv_heads x head_dim (/ tp)
OffloadTensor = Literal["decoder_layer_input", "query_proj", "key_proj", "value_proj", "out_proj"]
OFFLOAD_TENSORS: tuple[str, ...] = get_args(OffloadTensor)  # in this order: bit i of StrategyGrid.offload_tensors
ModulePrecisionText = Annotated[Literal["bf16", "mxfp8"], Meta(description=(
    "bf16: the module's GEMMs on the BF16 peak and curve, no quantization casts; mxfp8: on the fp8 peak at "
    "MXFP8's rate, with MXFP8's casts (needs a Blackwell accelerator)"))]


class ModulePrecisionSpec(Spec, kw_only=True):
    """GEMM precision per module of a low-precision (fp8 / fp4) run, where it differs from the run's own; a module
    not named runs at the run's precision. Names follow Megatron-Core's modules (docs/model.md#module-precision)."""

    attention_proj: Annotated[ModulePrecisionText | None, Meta(description=(
        "the attention block's weight GEMMs: linear_qkv and linear_proj (MLA: its down/up projections and "
        "linear_proj); the attention core is BF16 already"))] = None
    moe_latent: Annotated[ModulePrecisionText | None, Meta(description=(
        "LatentMoE's fc1_latent_proj (h -> l) and fc2_latent_proj (l -> h); needs moe.latent_size"))] = None
    mamba_out_proj: Annotated[ModulePrecisionText | None, Meta(description=(
        "a Mamba-2 mixer's out_proj (d_inner -> h); needs Mamba layers (hybrid pattern M)"))] = None
    mtp: Annotated[ModulePrecisionText | None, Meta(description=(
        "the whole multi-token prediction block (Megatron-Core mtp.*: its layer's GEMMs and eh_proj); needs "
        "mtp layers"))] = None

    def named(self) -> dict[str, str]:
        """The modules given, name -> precision."""
        return {k: str(v) for k, v in ((k, getattr(self, k)) for k in MODULE_PRECISION_MODULES) if v is not None}


#: training.module_precision's module names, in the order they are checked and reported.
MODULE_PRECISION_MODULES = ("attention_proj", "moe_latent", "mamba_out_proj", "mtp")


class TrainingSpec(Spec, kw_only=True):
    global_batch: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(
        description="sequences (or samples) per step")] = None
    micro_batch: Annotated[int, Meta(gt=0)] = 1
    seq_len: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(description="default: the workload's seq_len")] = None
    precision: TrainPrecision = "bf16"
    fp8_recipe: Annotated[Fp8RecipeText | None, Meta(description=(
        "with precision fp8: the scaling recipe, Transformer Engine's delayed | tensorwise (current scaling; "
        "aliases current, fp8-cs, fp8_cs, echoed as tensorwise) | mxfp8 (aliases fp8-mx, fp8_mx) | blockwise "
        "(Megatron-Core --fp8-recipe; mxfp8 needs a Blackwell accelerator, blockwise (Float8BlockScaling, 1x128 / "
        "128x128 tiles) a Hopper one: docs/model.md#fp8-blockwise) or torchao's rowwise | rowwise_with_gw_hp "
        "(torchtitan --float8.recipe_name; dense transformers on Hopper, Blackwell, CDNA3 or CDNA4: "
        "docs/model.md#fp8-rowwise); "
        "prices the FP8 quantization casts and the recipe's GEMMs. Not given: delayed, Megatron-Core's "
        "default"))] = None
    bf16_layers: Annotated[int, Meta(ge=0, le=100000, description=(
        "with precision fp8 or fp4: transformer layers kept in BF16 (Megatron-Core first_last_layers_bf16 with "
        "num_layers_at_start_in_bf16 + num_layers_at_end_in_bf16; Megatron-Bridge's Nemotron 3 Super NVFP4 preset "
        "keeps the last 14); their GEMMs on the BF16 peak and curve, without quantization casts, mixed over the "
        "layers (docs/model.md#nvfp4); with torchao's rowwise / rowwise_with_gw_hp, torchtitan's filter_fqns naming "
        "those layers; refused with fp8_recipe delayed, the default (Megatron-Core refuses it). "
        "Default 0: every layer in the low precision"))] = 0
    module_precision: Annotated[ModulePrecisionSpec | None, Meta(description=(
        "with precision fp8 or fp4: modules whose GEMMs run at another precision than the run's, e.g. "
        "{attention_proj: bf16, moe_latent: bf16, mtp: bf16, mamba_out_proj: mxfp8} (Megatron-Bridge's Nemotron 3 "
        "Super NVFP4 te_quant.cfg); each module's forward and backward GEMMs, quantization casts and weight casts "
        "at its own precision (docs/model.md#module-precision). Not given: every module at the run's precision"
    ))] = None
    optimizer_bytes_per_param: Annotated[float, Meta(ge=0, le=MAX_OPTIMIZER_BYTES,
        description="optimizer-state bytes per parameter: 12 = fp32 master + Adam m, v (ZeRO paper's K=12); "
                    "at most 64")] = 12.0
    optimizer: Annotated[OptimizerText | None, Meta(description=(
        "sgd | momentum | adam | rmsprop | adagrad: picks the staleness penalty's fitted kappa for async / stale "
        "sync modes (scalemodel/data/staleness_kappa.json); not given: the documented fallback, a borrowed "
        "fit"))] = None
    grad_bytes_per_param: Annotated[Annotated[float, Meta(ge=MIN_GRAD_BYTES, le=MAX_GRAD_BYTES)] | None, Meta(
        description="gradient element size, 1/8 (one bit) to 8 (fp64) bytes; default from precision (2 for "
                    "16-bit)")] = None
    train_tokens: Count | None = None
    train_samples: Count | None = None
    critical_batch: Annotated[Count | None, Meta(description=(
        "gradient noise scale B_noise, in global_batch's unit: sequences (samples for a generic workload)"))] = None
    work_cv: Annotated[float, Meta(ge=0.0, lt=10.0, description=(
        "coefficient of variation of one micro-batch's compute time (variable sequence lengths, "
        "data-dependent work); drives the load-imbalance term; derived from sequence_lengths when that is given"
    ))] = 0.0
    sequence_lengths: Annotated[Annotated[str, _SEQUENCE_LENGTHS] | None, Meta(
        description=(
        "sample length distribution in tokens: fixed (packed) | uniform:LO:HI; gives work_cv from the "
        "model's own cost of a sequence (GEMMs ~ L, attention ~ L^2)"))] = None
    attention_kernel: Annotated[Literal["auto", "gemm", "fa1", "fa2", "fa3", "cudnn", "triton", "xformers",
                                       "aiter"], Meta(
        description=(
            "the fused attention kernel that runs (strategy flash_attention true): fa1 | fa2 | fa3 (FlashAttention "
            "1/2/3) | cudnn (cuDNN fused attention: Transformer Engine FusedAttention, Megatron --attention-backend "
            "fused) | triton | xformers | aiter (AMD AITER's asm v3 FMHA: Primus-Turbo's attention), priced on the "
            "accelerator's fitted attention_efficiency curve; gemm: the "
            "core's two GEMMs on the GEMM curve; auto: what Transformer Engine picks, cudnn on Hopper and Blackwell, "
            "fa2 on Ampere, else gemm, and gemm where the accelerator has no curve for it "
            "(docs/model.md#attention-kernel)"))] = "auto"
    cudnn_release: Annotated[Annotated[str, _RELEASE_NUMBER_AS_TEXT, Meta(pattern=CUDNN_VERSION_PATTERN)] | None,
                             Meta(description=(
        "the cuDNN release the run's container ships, major.minor or major.minor.patch (e.g. '9.21.1'): the cudnn "
        "attention kernel is priced on the accelerator's curve of the nearest release it holds at or below this one "
        "(attention_releases, each fitted to that release's own sweep; never a later kernel than the run had), with a "
        "warning naming the curve when it is another release's; a release older than every one held is refused; "
        "unset: the accelerator's default curve (attention_efficiency; docs/model.md#cudnn-release)"
    ))] = None
    jax_release: Annotated[Annotated[str, _JAX_TEXT, Meta(pattern=JAX_RELEASE_PATTERN)] | None, Meta(description=(
        "the JAX / jaxlib release the run used, major.minor.patch (e.g. '0.4.23'): the XLA whose SPMD partitioner "
        "places an XLA program's tensor-parallel collectives (strategy.layer_impl xla, every TPU run). Up to 0.4.28 "
        "(measured at 0.4.20, 0.4.23, 0.4.26, 0.4.28; earlier releases taken as these) each weight-gradient dot of a "
        "tensor-parallel attention projection gathers its h-wide operand; from 0.4.29 (measured at 0.4.29, 0.4.30, "
        "0.4.37) its narrower head-side one (dQ, dK, dV, the attention output), one more all-gather of that width "
        "each in the backward at tensor > 1 (docs/model.md#xlaver36); unset: the later partitioner, the current "
        "releases'"))] = None
    moe_rank_imbalance: Annotated[Annotated[float, Meta(ge=1.0, le=1000.0)] | None, Meta(description=(
        "MoE: the measured max / mean routed token copies per expert-parallel rank of one MoE layer and micro-batch "
        "(the busiest EP rank's load over the mean); scales the routed experts' GEMMs and activation and the EP "
        "dispatch / combine bytes of every MoE layer, every dispatcher, at ep > 1 and at most what one rank can take, "
        "ep min(k, E/ep) / k (docs/model.md#moe-rank-imbalance); with moe_pad_to_capacity it is the capacity factor, "
        "priced at every ep, at most E / k. Not given: "
        "the expected maximum under uniform random top-k routing (Megatron-Core moe_router_force_load_balancing, "
        "which benchmark recipes set), a baseline computed from the shapes, not a measured figure; a learned router, "
        "even with an auxiliary load-balancing loss, is typically less balanced than that"))] = None
    moe_routing: Annotated[Literal["random", "cyclic"], Meta(description=(
        "MoE: how tokens are routed to experts where no measured moe_rank_imbalance says otherwise. random (default): "
        "each token's top-k a uniformly random k-subset of the E experts (Megatron-Core "
        "moe_router_force_load_balancing, the expected busiest rank and spread of that); cyclic: NeMo Automodel's "
        "FakeBalancedGate (noise 0), token t of each rank's micro-batch to experts (t k + j) mod E, j < k: a window of "
        "k consecutive experts, every expert the same count, so no busiest-rank excess or count spread, and the "
        "DeepEP / HybridEP dispatch moves each token to the domains and GPUs its window spans "
        "(docs/model.md#moe-cyclic-routing)"))] = "random"
    moe_pad_to_capacity: Annotated[bool, Meta(description=(
        "MoE: drop-and-pad dispatch (Megatron-Core --moe-pad-expert-input-to-capacity with "
        "--moe-expert-capacity-factor c; MaxText capacity_factor c): every expert receives exactly its capacity, c x "
        "its mean routed tokens at every ep, ep 1 included (give c as moe_rank_imbalance, at most E / k), so its GEMMs "
        "run that fixed row count in whole 128-row tiles, with no dropless router's random remainder "
        "(docs/model.md#expert-tile-padding). With strategy.layer_impl xla it is MaxText's dropping dense_matmul: "
        "dispatch and combine are einsums against one-hot capacity masks, no permutation "
        "(docs/model.md#maxtext-dropping-moe). Default false: dropless routing"))] = False
    moe_router_dtype: Annotated[Literal["fp32", "fp64"] | None, Meta(description=(
        "the MoE router's dtype (Megatron-Core --moe-router-dtype): its logits and so the routing probabilities in "
        "fp32 or fp64. Priced where the probabilities' dtype reaches the wire: the allgather dispatcher's gather of "
        "the probabilities and its combine reduce-scatter, and the alltoall dispatcher's expert-TP reduce-scatter "
        "before the combine, cast to it (docs/model.md#router-dtype); and in compute, where it is wider than the "
        "activations: the router's backward GEMMs at the TF32 (fp32) or FP64 peak and the casts of its input and input "
        "gradient, fp64's forward too (docs/model.md#router-dtype-compute). Not given: the activations' dtype"))] = None
    fp8_attention: Annotated[bool, Meta(description=(
        "with precision fp8 or fp4: the attention core runs in FP8 too (Transformer Engine fp8_dpa, Megatron-Core "
        "TransformerConfig.fp8_dot_product_attention, --fp8-dot-product-attention in forks of Megatron-LM; cuDNN's "
        "FP8 / MXFP8 SDPA; an fp4 run's under TE's current-scaling attention recipe, NVTE_DPA_FP8_RECIPE "
        "Float8CurrentScaling). Priced: the core on the 16-bit curve x its measured FP8 / BF16 time "
        "(docs/model.md#fp8-attention-rate), the FP8 backward of a sliding-window layer through the causal keys of "
        "the whole sequence (docs/model.md#fp8-attention), and with current scaling (fp8_recipe tensorwise, or fp4) "
        "the Q, K, V and dO casts (docs/model.md#fp8-attention-casts)"))] = False
    megatron_core_release: Annotated[Annotated[str, _MCORE_TEXT, Meta(pattern=MCORE_RELEASE_PATTERN)] | None, Meta(
        description=(
            "the Megatron-Core release the run's code matches, major.minor or major.minor.patch (e.g. '0.14'; a "
            "development commit: the last release whose behaviour it has): sets proj_original_input's default (the "
            "attention's linear_proj and the shared experts' linear_fc1 keep their 16-bit input), on for fp8 "
            "tensorwise / mxfp8 / blockwise from 0.14 (whose pyproject requires Transformer Engine >= 2.6) and for "
            "fp4 from 0.16 (TE >= 2.9). Unset: no release is assumed and proj_original_input defaults off "
            "(docs/model.md#megatron-core-release)"))] = None
    proj_original_input: Annotated[bool | None, Meta(description=(
        "on Megatron-Core's TE layers (strategy layer_impl megatron_te) with precision fp8 and fp8_recipe tensorwise, "
        "mxfp8 or blockwise, or precision fp4: the attention output projection (linear_proj) keeps its 16-bit input "
        "for the weight gradient instead of a quantized copy (Megatron-Core set_save_original_input; "
        "docs/model.md#proj-original-input): the backward quantizes that input again, and the activations hold no "
        "quantized copy of it; the shared experts' linear_fc1 likewise (docs/model.md#shared-fc1-original-input). "
        "Unset: as megatron_core_release has it (off when that is unset); true: on for the "
        "recipes of that release (every one above when unset); false: off. Ignored elsewhere (delayed scaling, "
        "other frameworks)"))] = None
    nvfp4_disable: Annotated[list[Literal["rht", "stochastic_rounding", "2d_quantization"]], Meta(
        description=(
            "with precision fp4: the options of Transformer Engine's NVFP4 recipe the run switches off "
            "(NVFP4BlockScaling disable_rht / disable_stochastic_rounding / disable_2d_quantization, the "
            "NVTE_NVFP4_DISABLE_RHT / _STOCHASTIC_ROUNDING / _2D_QUANTIZATION environment variables; MLPerf "
            "v5.1's 'Vanilla recipe' sets all three). Priced: stochastic_rounding off takes the output-gradient "
            "casts off the stochastic-rounding kernel rate (docs/model.md#nvfp4-stochastic-rounding); rht and "
            "2d_quantization off leave the cast bytes and GEMMs as they are (docs/model.md#nvfp4-recipe-options)"
        ))] = []

    def _check(self) -> None:
        if self.proj_original_input and self.megatron_core_release is not None \
                and not proj_original_input_recipes(self):
            raise field_error("proj_original_input", (
                f"true with megatron_core_release {self.megatron_core_release!r}: that release sets no "
                "save_original_input on linear_proj (fp8 other than delayed from 0.14, fp4 from 0.16; "
                "docs/model.md#megatron-core-release)"),
                "false or unset with that release, or a release from '0.14'", also="megatron_core_release")
        if self.fp8_recipe is not None and Precision.parse(self.precision) != Precision.FP8:
            raise field_error("fp8_recipe", f"{self.fp8_recipe!r} needs precision fp8 (got {self.precision!r})",
                              _not_fp8(self.precision), also="precision")
        if self.bf16_layers and Precision.parse(self.precision) not in (Precision.FP8, Precision.FP4):
            raise field_error("bf16_layers", f"{self.bf16_layers} needs precision fp8 or fp4 (got "
                              f"{self.precision!r}): every layer of a 16- or 32-bit run is in that precision",
                              "0, or precision fp8 / fp4")
        if (self.bf16_layers and Precision.parse(self.precision) == Precision.FP8
                and (self.fp8_recipe or "delayed") == "delayed"):
            # Megatron-Core refuses it: TransformerConfig.__post_init__ raises "Delayed scaling does not support first /
            # last layer in BF16." (transformer_config.py L1527-1530 at NVIDIA/Megatron-LM@d98e8a64dd; the same assert
            # in fp8_utils.py get_fp8_context L883-888): under delayed scaling the block runs in one outer
            # fp8_autocast (transformer_block.py L619-629), so a per-layer BF16 context cannot apply. torchao's
            # row-wise recipes take them: convert_to_float8_training swaps only the nn.Linear its module_filter_fn
            # accepts, whatever the recipe (pytorch/ao@4fc4068d6 torchao/float8/float8_linear_utils.py L23, L72), and
            # torchtitan passes its filter_fqns there under every recipe (pytorch/torchtitan@e7c0cae
            # torchtitan/components/quantization/float8.py L104-111, utils.py L25: a substring of the module's FQN,
            # "layers.0." keeps the first layer's linears in BF16; mtp30)
            raise field_error("bf16_layers", f"{self.bf16_layers} with fp8_recipe "
                              f"{self.fp8_recipe or 'delayed (the default)'}: Megatron-Core refuses BF16 first / last "
                              "layers under delayed scaling",
                              "0 with the delayed recipe, or fp8_recipe tensorwise / mxfp8 / blockwise / rowwise / "
                              "rowwise_with_gw_hp, or precision fp4", also="fp8_recipe")
        named = self.module_precision.named() if self.module_precision is not None else {}
        if named and Precision.parse(self.precision) not in (Precision.FP8, Precision.FP4):
            k = next(iter(named))
            raise field_error(f"module_precision.{k}", f"{k}: {named[k]} needs precision fp8 or fp4 (got "
                              f"{self.precision!r}): every module of a 16- or 32-bit run is in that precision",
                              "leave module_precision out, or precision fp8 / fp4")
        if self.fp8_attention and Precision.parse(self.precision) not in (Precision.FP8, Precision.FP4):
            raise field_error("fp8_attention", f"true needs precision fp8 or fp4 (got {self.precision!r}): the "
                              "attention core of a 16- or 32-bit run is in that precision",
                              "precision fp8 / fp4, or leave it out", also="precision")
        if self.nvfp4_disable and Precision.parse(self.precision) != Precision.FP4:
            raise field_error("nvfp4_disable", f"{list(self.nvfp4_disable)} needs precision fp4 (got "
                              f"{self.precision!r}): they are options of the NVFP4 recipe",
                              "precision fp4, or leave it out", also="precision")
        if len(set(self.nvfp4_disable)) < len(self.nvfp4_disable):
            raise field_error("nvfp4_disable", f"{list(self.nvfp4_disable)} names an option twice",
                              "each of rht, stochastic_rounding, 2d_quantization at most once")
        if self.fp8_recipe in ROWWISE_FP8_RECIPES and (named or self.fp8_attention):
            what = "module_precision" if named else "fp8_attention"
            raise field_error(what, f"{what} is Transformer Engine's, but fp8_recipe {self.fp8_recipe} is torchao's "
                              "Float8Linear (every nn.Linear but the output layer in FP8, attention in BF16)",
                              f"leave {what} out with a row-wise recipe, or fp8_recipe {TE_FP8_RECIPES_TEXT}")


#: The smallest ``bucket_size`` taken: 1 KiB, fewer than 512 16-bit gradients. No framework sets a floor (PyTorch
#: DDP's bucket_cap_mb, DeepSpeed's reduce_bucket_size and Megatron-LM's --ddp-bucket-size take any positive size),
#: but none splits a parameter tensor over buckets (PyTorch's Reducer, compute_bucket_assignment_by_size, closes a
#: bucket only after a whole tensor), so a cap below one row of a weight matrix (hidden >= 768 in every catalog
#: model) still sends whole tensors; the step model caps the bucket count at the parameter tensors for that reason
#: (engine.dp_comm.bucket_count); before the cap a 1-byte bucket priced gpt-1.7b on 64 H100 a 2.65-day step.
MIN_BUCKET_BYTES = 1024.0


#: The end of a refusal of a ZeRO-dependent switch where zero was not given: specs.base.ZERO_UNSET_HINT (the loader
#: takes it back where the mapping wrote zero, specs.base.written_zero_refusal), read here at each refusal.
ZERO_UNSET_HINT = base.ZERO_UNSET_HINT


def _zero_refusal(name: str, what: str, allowed: str, *, zero: Zero, also: str = "zero") -> ValueError:
    """field_error of a switch that some ZeRO stages run, refused at ``zero``: at zero 0, what a strategy that never
    names zero gets, its allowed text ends with :data:`ZERO_UNSET_HINT` (the options that give zero are named by
    commands.common.validate_written) and it carries errors.InputError.needs_zero, the one place both are written.
    ux38: the callers that give or search zero instead (commands.plan, commands.common, specs.frameworks) matched
    the hint's text, which a reworded hint would silently have broken."""
    unset = zero == Zero.NONE
    return field_error(name, what, f"{allowed}; {ZERO_UNSET_HINT}" if unset else allowed, also=also, needs_zero=unset)

#: The words of a :attr:`~scalemodel.specs.strategy_file.StrategyFile.unused` entry for a setting that decides the ZeRO
#: stage but is not read from the file (Megatron-LM's --use-torch-fsdp2 / --use-megatron-fsdp): the stage is 0 unless
#: the command line gives it (``StrategyFile.zero_not_read``). Here, not in specs.strategy_file, so that a query
#: without ``--strategy`` (commands.common names it in a refusal) does not import that module (latency37).
ZERO_NOT_READ = "FSDP is not read from the flags"


#: The parts of tp_comm_overlap's userbuffers overlap a run can switch off, StrategySpec's fields of these names
#: (Megatron-Core ModelParallelConfig.tp_comm_overlap_ag / _rs / tp_comm_bulk_dgrad / _wgrad, NVIDIA/Megatron-LM@
#: d98e8a64dd model_parallel_config.py L271-289; docs/model.md#tp-comm-parts): the job's grid defaults and warning, the
#: planner's pinned fields and the Megatron-LM reader's --no- / --disable- switches each name them from here.
TP_COMM_PARTS = ("tp_comm_overlap_ag", "tp_comm_overlap_rs", "tp_comm_bulk_dgrad", "tp_comm_bulk_wgrad")


class StrategySpec(Spec, kw_only=True):
    dp: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(
        description="data-parallel degree; default N / (tp pp cp)")] = None
    tp: Annotated[int, Meta(gt=0)] = 1
    pp: Annotated[int, Meta(gt=0)] = 1
    cp: Annotated[int, Meta(gt=0)] = 1
    cp_comm_type: Annotated[CpCommTypeText, Meta(description=(
        "how context parallelism exchanges attention inputs (Megatron-Core --cp-comm-type, Transformer Engine's "
        "context_parallel.py): p2p (K, V passed round the cp ring under the attention kernels, the default), "
        "all_gather (K, V all-gathered before the attention, dK, dV reduce-scattered after the backward, "
        "exposed; the Llama 3 paper's CP) or a2a (DeepSpeed-Ulysses all-to-alls of Q, K, V and the output, "
        "exposed; needs heads and KV heads per TP rank divisible by cp) or a2a+p2p (hierarchical: a2a inside "
        "groups of cp_a2a_size CP ranks, the p2p ring across them); docs/model.md#cp-comm"))] = "p2p"
    cp_a2a_size: Annotated[int, Meta(ge=1, description=(
        "cp_comm_type a2a+p2p: CP ranks of one all-to-all group (Megatron-Core --hierarchical-context-parallel-sizes "
        "A P: this is A, the p2p ring runs over P = cp / A); must divide cp; ignored by the other exchanges"))] = 1
    ep: Annotated[int, Meta(gt=0)] = 1
    etp: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(description=(
        "expert tensor-parallel degree (Megatron-Core --expert-tensor-parallel-size); default tp. The expert grid "
        "folds etp x ep over each stage's tp x cp x dp ranks (MoE parallel folding, arXiv 2504.14960), so ep need "
        "only divide tp cp dp / etp, not dp"))] = None
    moe_a2a_overlap: Annotated[bool, Meta(description=(
        "overlap each micro-batch's expert-parallel all-to-alls with another micro-batch's computation in the "
        "1F1B steady state (Megatron-Core --overlap-moe-expert-parallel-comm with --delay-wgrad-compute; "
        "Megatron-Bridge moe_a2a_overlap); needs ep > 1, no full recompute, and the interleaved schedule when pp > 1"
    ))] = False
    moe_shared_expert_overlap: Annotated[bool, Meta(description=(
        "run an MoE layer's shared experts on a stream of their own beside the token dispatcher, fc1 under the "
        "dispatch all-to-all and fc2 under the combine (Megatron-Core --moe-shared-expert-overlap, alltoall or flex "
        "dispatcher; docs/model.md#shared-expert-overlap); not with moe_a2a_overlap nor selective recompute of "
        "shared_experts"))] = False
    moe_shared_expert_stream: Annotated[bool, Meta(description=(
        "run an MoE layer's whole shared-expert MLP on a stream of its own, forked after the router, before the "
        "dispatch, and joined after the combine (NeMo Automodel MoE.forward's _shared_experts_stream), so its forward "
        "runs beside the dispatch "
        "and its backward beside the combine's backward: each hides at most that one all-to-all "
        "(docs/model.md#shared-expert-stream); not with moe_shared_expert_overlap (Megatron-Core's split) nor "
        "moe_a2a_overlap"))] = False
    ep_dispatch_sms: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(description=(
        "SMs the expert-parallel dispatch/combine kernels occupy while they run (docs/model.md#contention): the "
        "compute an EP all-to-all hides under (moe_a2a_overlap) runs on the rest. Megatron-Core's flex dispatcher "
        "runs DeepEP / HybridEP on a configured count (moe_deepep_num_sms, default 20; moe_hybridep_num_sms, "
        "default 16 at core_dev_r0.15.0; moe_flex_dispatcher_num_sms later; Megatron-Bridge 25.11 and 26.08 HybridEP "
        "presets: 32). "
        "None: the default of the dispatcher that runs: NCCL's all-to-all (Megatron-Core alltoall dispatcher), the "
        "accelerator's collective_units; with moe_flex_dispatcher, the backend's (moe_flex_backend): DeepEP's 20 SMs "
        "(Megatron-Core's), HybridEP's 24 with the EP group in one NVLink domain and 8 across domains"))] = None
    moe_flex_dispatcher: Annotated[bool, Meta(description=(
        "the EP tokens move with a hierarchical dispatcher (Megatron-Core moe_token_dispatcher_type flex: DeepEP or "
        "HybridEP, moe_flex_dispatcher_backend; docs/model.md#ep-hierarchical): each token crosses the network once "
        "per destination NVLink domain and NVLink once per destination GPU, not once per (token, expert) pair as "
        "with NCCL's all-to-all (false: Megatron-Core's alltoall dispatcher)"))] = False
    moe_allgather_dispatcher: Annotated[bool, Meta(description=(
        "the EP tokens move with Megatron-Core's allgather dispatcher (moe_token_dispatcher_type allgather, "
        "Megatron-Core's default; docs/model.md#ep-allgather): every token, its routing map and its probabilities "
        "all-gathered over the etp x ep group, the combine reduce-scattered back, in place of the all-to-alls; "
        "not with moe_flex_dispatcher, moe_a2a_overlap nor moe_shared_expert_overlap (Megatron-Core refuses them "
        "with it)"))] = False
    moe_flex_backend: Annotated[FlexBackendText, Meta(description=(
        "which backend the flex dispatcher runs (Megatron-Core --moe-flex-dispatcher-backend; "
        "docs/model.md#ep-hierarchical): deepep (Megatron-Core's default; each token copy carries its top-k indices "
        "and weights; 20 SMs when ep_dispatch_sms is unset) or hybridep (each copy carries the fp32 probabilities of "
        "the destination domain's experts; unset ep_dispatch_sms: 24 SMs with the EP group in one NVLink domain, 8 "
        "across). Priced only with moe_flex_dispatcher"))] = "deepep"
    moe_layer_host_s: Annotated[SecondsOrZero, Meta(description=(
        "host (CPU) seconds to issue one MoE layer's forward and backward for one micro-batch, where the token "
        "dispatcher synchronises the host on the tokens per expert every MoE layer (dropless, not padded to "
        "capacity; Megatron-Core alltoall) and the dispatch is not CUDA-graphed: each MoE layer then takes at least "
        "this long (docs/model.md#host). 0: not priced. Megatron-Bridge 25.11 on a DGX B200 host: 9.18 ms. Where the "
        "run CUDA-graphs attention but not the dispatch (cuda_graph_scope attn, moe_router, moe_preprocess), or the "
        "MoE layer holds no attention (a hybrid model's), give 0.7151 of it (6.56 ms: the expert path's share, "
        "scalemodel.engine.host_floor.host_floor_scale(16, False)) and set moe_host_attention_graphed. The eager "
        "op calls of the unfused paths the strategy sets (eager_rope, eager_bias_dropout_add, eager_glu_clamp, "
        "eager_expert_bias) are added to it (docs/model.md#host-eager-ops)"))] = 0.0
    zero: ZeroText = "0"
    recompute: RecomputeText = "none"
    sequence_parallel: Annotated[bool | None, Meta(description=(
        "Megatron-style sequence parallelism: the norms, dropouts and residual stream split over the TP ranks, each "
        "TP all-reduce an all-gather + reduce-scatter (arXiv 2205.05198). Unset (null): off, except for an MoE model "
        "at tp > 1 under layer_impl megatron_te, which Megatron-Core trains only with it (MoELayer.forward raises "
        "without it): priced on there, with a notice. false there is refused (docs/model.md#moe-sp-required)"))] = None
    schedule: Annotated[str, _SCHEDULE, Meta(description="1f1b | interleaved:V | gpipe | zb")] = "1f1b"
    sync: Annotated[str, _SYNC, Meta(description="bsp | backup:B | asp | ssp:S | local:H | hier:G | hier:G:H")] = "bsp"
    algorithm: Annotated[str, _ALGORITHM, Meta(
        description="collective algorithm for DP: auto|ring|tree|rhd|hierarchical")] = "auto"
    overlap: bool = True
    compression: Annotated[str, _COMPRESSION, Meta(description="none | fp16 | int8 | topk:FRACTION")] = "none"
    dp_comm: Annotated[str, _DP_COMM, Meta(description="allreduce | ps:K[:colocated|:dedicated]")] = "allreduce"
    flash_attention: Annotated[bool, Meta(
        description="fused attention (Dao et al. 2022): no s x s scores in memory or HBM traffic")] = True
    bucket_size: Annotated[Bytes | None, Meta(description=(
        "gradient bucket per DP collective, at least 1 KiB; default per framework: PyTorch DDP 25 MiB (ZeRO 0), "
        "DeepSpeed reduce_bucket_size 5e8 elements (ZeRO 1-3), one layer (FSDP)"))] = None
    shard_group: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(description=(
        "zero: hsdp: data-parallel replicas per sharding group (PyTorch HYBRID_SHARD); default: the "
        "replicas in one node"))] = None
    first_stage_layers: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(description=(
        "layers on the first pipeline stage (Megatron-LM --decoder-first-pipeline-num-layers); the "
        "other stages share the rest evenly; default: the balanced split"))] = None
    last_stage_layers: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(description=(
        "layers on the last pipeline stage (Megatron-LM --decoder-last-pipeline-num-layers)"))] = None
    stage_layers: Annotated[list[Annotated[int, Meta(ge=0)]] | None, Meta(description=(
        "decoder layers of each pipeline stage in order, one count per stage (pp counts), or with interleaved:V per "
        "virtual stage (pp x V counts: virtual stage c of rank r is entry c pp + r, Megatron-LM's "
        "--pipeline-model-parallel-layout order); a stage may hold none (Megatron's layout allows it); they sum to "
        "the model's layers; each rank priced on its own layers (docs/model.md#stage-layers); instead of "
        "first/last_stage_layers and first/last_chunk_layers; default: the balanced split"))] = None
    first_chunk_layers: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(description=(
        "interleaved:V only: decoder layers in the first of the pp x V model chunks (the one holding the "
        "embedding); the other chunks but the last share the rest evenly. Megatron-LM "
        "--account-for-embedding-in-pipeline-split gives (L + 1 [+ 1]) / (pp V) - 1; default: the balanced split"
    ))] = None
    last_chunk_layers: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(description=(
        "interleaved:V only: decoder layers in the last model chunk (the one holding the output layer and "
        "loss); Megatron-LM --account-for-loss-in-pipeline-split gives (L [+ 1] + 1) / (pp V) - 1"))] = None
    recompute_layers: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(description=(
        "recompute: full only: layers of each pipeline chunk whose activations are recomputed (Megatron-LM "
        "--recompute-method block --recompute-num-layers N); the chunk's other layers keep their activations; "
        "default: every layer"))] = None
    recompute_modules: Annotated[str, _MODULES, Meta(pattern=r"^([a-z_]+(,[a-z_]+)*)?$", description=(
        "recompute: selective only: what is recomputed, comma-separated: core_attn (the default), mla_up_proj, "
        "moe_act, moe (the whole MoE block: router, dispatch and combine, experts), layernorm (the norms that are "
        "modules of their own: MoE layers' pre-MLP norm, MLA's input norm), mlp (a dense layer's MLP block), "
        "shared_experts (an MoE layer's shared experts; Megatron-Core --recompute-modules), "
        "jax_dots (JAX checkpoint_dots_with_no_batch_dims, MaxText "
        "remat_policy=minimal), jax_qkvo (MaxText remat_policy save_dot_except_mlp / save_dot_except_mlpwi: "
        "saves Q, K, V and the output projection, recomputes the core, norms and MLP up-projections; dense layers, "
        "or MoE layers with moe named too), jax_qkv (MaxText remat_policy save_qkv_proj, or custom / "
        "qkv_proj_offloaded with out_proj 'remat': as jax_qkvo but the output projection is recomputed too), "
        "jax_context (beside jax_qkvo or jax_qkv: MaxText remat_policy custom with context 'device' too, the "
        "attention kernel's output and residuals kept, so the attention core is not recomputed), "
        "titan_op (torchtitan selective_ac_option op: saves SDPA and every other mm, "
        "recomputes the rest; dense layers only); changes the activation memory (scalemodel.cost.memory)"))] = ""
    recompute_method: Annotated[RecomputeMethodText, Meta(description=(
        "with recompute_layers N: block recomputes the first N layers of each pipeline chunk; uniform recomputes "
        "every layer in checkpointed chunks of N layers (Megatron-LM --recompute-method)"))] = "block"
    offload_layers: Annotated[int, Meta(ge=0, description=(
        "layers per pipeline stage whose activations are offloaded to host memory in the forward pass and "
        "loaded back for the backward (Megatron-Core cpu_offloading_num_layers); needs the cluster's host_bandwidth"
    ))] = 0
    offload_tensors: Annotated[list[OffloadTensor], Meta(description=(
        "named per-layer tensors sent to host memory in the forward and loaded back for the backward (MaxText "
        "remat_policy custom with 'offload', qkv_proj_offloaded: JAX save_and_offload_only_these_names, "
        "offload_dst pinned_host); the rest of the layer is saved or recomputed as recompute_modules says. Needs "
        "recompute selective with recompute_modules jax_qkvo (the policy that would keep q, k, v and out_proj on "
        "the device) or jax_qkv (q, k and v; out_proj recomputed, so not offloaded) and the cluster's "
        "host_bandwidth (docs/model.md#offload)"))] = []
    offload_states: Annotated[StateOffloadText, Meta(description=(
        "model states in host memory, updated by a CPU optimizer (docs/model.md#state-offload): none; optimizer "
        "(ZeRO-Offload, DeepSpeed offload_optimizer device cpu: fp32 master, Adam moments and gradients on the host, "
        "CPU-Adam, the 16-bit parameters copied back; zero 1, 2 or 3); optimizer+params (ZeRO-Infinity's / "
        "DeepSpeed offload_param with offload_optimizer, PyTorch FSDP CPUOffload(offload_params=True): the parameter "
        "shards on the host too, copied to the GPU before each all-gather; zero 3, fsdp or hsdp). Needs an Adam "
        "optimizer and the cluster's host_bandwidth"))] = "none"
    tp_comm_overlap: Annotated[bool, Meta(description=(
        "tensor-parallel all-gathers/reduce-scatters overlapped with the GEMMs that consume/produce them "
        "(Megatron-LM --tp-comm-overlap, Transformer Engine userbuffers); default: only the backward ones, under "
        "the weight-gradient GEMMs"))] = False
    tp_async_allreduce: Annotated[bool, Meta(description=(
        "the backward pass's tensor-parallel collectives run under the weight-gradient GEMMs (Megatron-LM's "
        "asynchronous TP all-reduce, added in cf7efd4f and on by default since 3f652469, 2021-09-02); false: each "
        "runs after its linear layer's whole backward and is exposed (Megatron-LM before it, "
        "microsoft/Megatron-DeepSpeed in 2021, bigscience-workshop/Megatron-DeepSpeed); with sequence_parallel the "
        "reduce-scatters stay under them either way (Megatron launches them async); with tp_comm_overlap the "
        "userbuffers overlap applies instead"
    ))] = True
    overlap_param_gather: Annotated[bool, Meta(description=(
        "zero 1/2 (distributed optimizer): the parameter all-gather runs under the next step's first forward pass "
        "(Megatron-LM --overlap-param-gather); default: the whole gradient sync shares the last backward"))] = False
    deepspeed_pipeline: Annotated[bool, Meta(description=(
        "the pipeline runs on DeepSpeed's PipelineEngine (Megatron-DeepSpeed): each stage boundary exchanges the "
        "activation and then the gradient, one after the other (4 send/recvs per micro-batch on a stage, not 2), "
        "both partitioned over TP and gathered back (3 TP all-gathers per micro-batch), and every micro-batch's "
        "weight gradients are added into the accumulation buffer by a separate pass (docs/model.md#pp-comm)"
    ))] = False
    nanotron_trainer: Annotated[bool, Meta(description=(
        "the job runs on Hugging Face nanotron's trainer (huggingface/nanotron@c2528430), with fp32 gradient "
        "accumulation when the gradient element is wider than the parameter (accumulate_grad_in_fp32): every "
        "micro-batch's 16-bit weight gradients are added into the fp32 buffers by a separate pass; at zero 1 nanotron "
        "builds no DDP wrapper, so the whole fp32 gradient buffer is all-reduced over DP in one call after the last "
        "backward (not reduce-scattered, not under the backward) and the updated 16-bit parameters are all-gathered in "
        "one call after the optimizer step (with 16-bit gradients at zero 1 DDP all-reduces them in its buckets "
        "instead, under the backward, before that gather); at zero 0 its DDP buckets are 25 MiB of the 16-bit "
        "gradients (docs/model.md#nanotron)"
    ))] = False
    fsdp_reshard_after_forward: Annotated[bool, Meta(description=(
        "zero 3/fsdp/hsdp: free each unit's gathered parameters after its forward and gather them again for its "
        "backward (PyTorch fully_shard reshard_after_forward=True, ZeRO-3's release). false: keep them from the "
        "forward to the backward, so the backward all-gathers vanish but every unit's unsharded parameters are "
        "held at once (reshard_after_forward=False; FSDP1 SHARD_GRAD_OP; Llama 3, arXiv 2407.21783 §3.3.2; "
        "torchtitan fsdp_reshard_after_forward never, or default with pipeline parallelism)"))] = True
    fsdp_fp8_all_gather: Annotated[bool, Meta(description=(
        "zero fsdp/hsdp with precision fp8: the linear layers' weights are cast to float8 before the FSDP "
        "all-gather, 1 byte per element on the wire and in the gathered copy; norms, embeddings, the output layer "
        "and routed experts stay 16-bit (torchao Float8Linear enable_fsdp_float8_all_gather, tensorwise scaling; "
        "torchtitan [float8] enable_fsdp_float8_all_gather)"))] = False
    megatron_ddp: Annotated[bool, Meta(description=(
        "zero 0/1: the data-parallel sync runs on Megatron-Core's DistributedDataParallel: with overlap, gradient "
        "buckets of max(4e7, 1e6 x dp x cp) elements unless bucket_size is given (--ddp-bucket-size); without "
        "overlap, one bucket per buffer (megatron/training/training.py resolve_ddp_bucket_size); "
        "docs/model.md#megatron-buckets. Set by a Megatron-LM strategy file"))] = False
    align_grad_reduce: Annotated[bool, Meta(description=(
        "megatron_ddp with the interleaved schedule and overlap: each model chunk's gradient sync is launched "
        "after its last micro-batch's backward, the first chunk's buckets included (Megatron-LM's default, "
        "--no-align-grad-reduce turns it off; Megatron-Bridge DistributedInitConfig.align_grad_reduce); false: "
        "the sync is enabled before each chunk's last backward, so the first chunk's buckets run under it "
        "(NeMo 2.2, whose DDP config has no such field); docs/model.md#interleaved-dp-sync"))] = True
    grad_accumulation_fusion: Annotated[bool, Meta(description=(
        "megatron_ddp: each linear layer's weight-gradient GEMM accumulates into the fp32 main_grad buffer "
        "itself "
        "(Megatron-LM's default; --no-gradient-accumulation-fusion, Primus' gradient_accumulation_fusion false, "
        "turns it off); false: the GEMM returns a 16-bit gradient and Megatron-Core DDP's backward hook adds it "
        "into main_grad, one extra pass over every parameter per micro-batch "
        "(docs/model.md#grad-accum-fusion)"))] = True
    main_grad_hook: Annotated[bool, Meta(description=(
        "NeMo 1's megatron_amp_O2 optimizer: a per-parameter backward hook adds each micro-batch's 16-bit gradient "
        "into the main-gradient buffer and frees it (MainParamsOptimizerWrapper's param_hook, NeMo v1.9.0-v1.11.0 "
        "optimizer_with_main_params.py; Apex DistributedFusedAdam's _grad_copy at 98661600), as Megatron-Core DDP's "
        "hook does: with grad_accumulation_fusion false, one pass of e + 2 g bytes over every parameter per "
        "micro-batch (docs/model.md#nemo1-main-grad-hook); with it true the fused weight-gradient GEMMs write the "
        "buffer and nothing is added. Not with megatron_ddp, deepspeed_pipeline or nanotron_trainer, nor zero 3, fsdp "
        "or hsdp"))] = False
    bucket_fragments: Annotated[bool, Meta(description=(
        "the data-parallel gradient buckets are Apex DistributedFusedAdam's as NeMo 1's distributed_fused_adam sets "
        "them up: they cut parameter tensors at their boundaries (ParameterFragment), one group of buckets a "
        "Transformer layer (a virtual stage under VPP), each group's buckets reduce-scattered and all-gathered in "
        "one coalesced NCCL group: G layers x ceil(ceil(X / G / S) / channels) latencies for a payload of X bytes "
        "in buckets of S bytes (zero 1 or 2, no other trainer); false: every bucket holds whole tensors, a tensor "
        "larger than a bucket closes one of its own, and each bucket is its own collective (Megatron-Core, PyTorch "
        "DDP, DeepSpeed ZeRO-1/2); docs/model.md#dp-comm. Under the interleaved schedule with overlap, NeMo 1 hands "
        "the schedule Apex's grad and param sync per model chunk: each chunk's reduce-scatter after its last "
        "backward, each gather launched a chunk ahead after Apex waits for the one in flight "
        "(docs/model.md#apex-interleaved)"))] = False
    align_param_gather: Annotated[bool, Meta(description=(
        "megatron_ddp with the interleaved schedule and overlap_param_gather: the schedule gathers the first two "
        "model chunks' parameters when it starts and chunk j + 1's at chunk j's first forward, pp chunk-forwards "
        "before they are needed (Megatron-LM's default for interleaving, --no-align-param-gather turns it off; "
        "Megatron-Bridge and NeMo 2.2 set it when pp > 1 and vpp > 1); false: each later chunk's gather starts "
        "at its own first forward and is exposed; docs/model.md#interleaved-dp-sync"))] = True
    overlap_param_gather_with_optimizer_step: Annotated[bool, Meta(description=(
        "megatron_ddp at zero 1 with the interleaved schedule and overlap_param_gather: the first model chunk gets "
        "an optimizer of its own, stepped first, and its parameter all-gather is dispatched right after it, under "
        "the optimizer step of the other chunks and the next step's gradient-buffer reset, not at the next forward; "
        "its DDP is built without bucketing, so that chunk's gradient sync, NaN check and gather are one bucket a "
        "buffer (Megatron-Core OptimizerConfig.overlap_param_gather_with_optimizer_step, default false; Megatron-LM "
        "--overlap-param-gather-with-optimizer-step; set by NeMo 2.2 / 2.3's and Megatron-Bridge 0.2's "
        "performance scripts where dp, pp and vpp > 1); docs/model.md#optimizer-step-gather"))] = False
    fp8_param_gather: Annotated[bool, Meta(description=(
        "zero 1/2 (Megatron-Core's distributed optimizer) with precision fp8: the transformer layers' linear "
        "weights (experts' included) are Transformer Engine FP8 tensors, all-gathered after the optimizer step "
        "at 1 byte per element and held at 1 byte (per-tensor recipes: MXFP8 parameters are gathered in BF16 "
        "through the gradient buffer); norms, embeddings and the output layer stay 16-bit; with zero "
        "fsdp/hsdp (Megatron-FSDP) the dense linear weights are gathered in FP8 as fsdp_fp8_all_gather prices "
        "(Megatron-LM --fp8-param-gather; Megatron-Bridge fp8_param_gather, on in its FP8-CS and MXFP8 "
        "mixed-precision presets)"))] = False
    fp4_param_gather: Annotated[bool, Meta(description=(
        "zero 1/2 (Megatron-Core's distributed optimizer) with precision fp4: the transformer layers' linear "
        "weights are Transformer Engine NVFP4 tensors (16 x 16 block scales), all-gathered after the optimizer "
        "step as their packed 4-bit row-wise data (0.5 byte per element; each rank's scales come from an "
        "all-reduce of the block amaxes) and held with both copies and their E4M3 scales (2 x (1/2 + 1/16) = "
        "1.125 bytes); the optimizer quantizes its fp32 master shard once per step and each GPU transposes the "
        "gathered weights; norms, embeddings and the output layer stay 16-bit (Megatron-LM --fp4-param-gather; "
        "Megatron-Bridge fp4_param_gather, on in its bf16_with_nvfp4_mixed preset; docs/model.md#fp4-param-gather)"
        ))] = False
    fsdp_flat_param: Annotated[bool, Meta(description=(
        "zero 2/3/fsdp/hsdp on PyTorch FSDP1 (FullyShardedDataParallel with FlatParameter, as Composer wraps "
        "models): every micro-batch, each unit's unsharded gradient crosses HBM up to three more times before its "
        "reduce-scatter: concatenated from the per-parameter gradients (the backward of the flat parameter's "
        "split), cast to the reduce dtype when it differs from the 16-bit parameters, and divided by the "
        "pre-divide factor (torch/distributed/fsdp/_runtime_utils.py _post_backward_hook, _reduce_grad); "
        "docs/model.md#fsdp1-gradient"))] = False
    fsdp_per_param: Annotated[bool, Meta(description=(
        "zero fsdp/hsdp on PyTorch FSDP2 (fully_shard, per-parameter sharding, as torchtitan and NeMo Automodel "
        "wrap models): each all-gather's flat output is copied into the unsharded parameters (read + write of the "
        "gathered bytes) and each reduce-scatter's input is built by copying every unsharded gradient into a buffer "
        "of the reduce dtype (read the gradient, write it cast), every micro-batch (the forward's once a step with "
        "fsdp_defer_grad_sync, whose later forwards gather nothing) (torch/distributed/fsdp/_fully_shard/"
        "_fsdp_collectives.py foreach_all_gather_copy_out, foreach_reduce); docs/model.md#fsdp2-copies"))] = False
    fsdp_defer_grad_sync: Annotated[bool, Meta(description=(
        "zero fsdp/hsdp on PyTorch FSDP2 (pp 1, or pp > 1 with fsdp_reshard_after_forward false: per stage, "
        "torch.distributed.pipelining's FSDP stage, its reduce-scatters after the stage's last backward, exposed): "
        "every micro-batch but the last runs with "
        "set_requires_gradient_sync(False) and set_reshard_after_backward(False) (NeMo Automodel's MoE models with "
        "backend.enable_fsdp_optimizations, components/moe/fsdp_mixin.py): the gradients are reduce-scattered once "
        "a step, under the last micro-batch's backward, and accumulate unsharded (at the reduce dtype) between "
        "micro-batches; the parameters a backward gathered stay gathered into the next forward, so the forwards "
        "after the first gather nothing and every unit's unsharded parameters are held at once; "
        "docs/model.md#fsdp-deferred-sync"))] = False
    xla_gpu_lhs: Annotated[bool, Meta(description=(
        "zero fsdp or hsdp compiled by XLA for GPUs with its latency-hiding scheduler on its default, approximate "
        "cost model (--xla_gpu_enable_latency_hiding_scheduler=true, no PGLE profile, no analytical estimator): "
        "each unit's parameter all-gather and gradient reduce-scatter, and hsdp's cross-group gradient "
        "all-reduces, combined up to bucket_size bytes (--xla_gpu_all_reduce_combine_threshold_bytes; XLA's "
        "30 MiB when unset), each overlap only about 5 kernels of compute, whatever their size (openxla/xla "
        "xla/service/gpu/gpu_hlo_schedule.cc GpuLatencyEstimator); docs/model.md#xla-gpu-lhs"))] = False
    attention_unpad: Annotated[bool, Meta(description=(
        "flash attention runs the variable-length kernel on tokens gathered by a padding mask "
        "(flash_attn.bert_padding unpad_input / pad_input, as llm-foundry's attn_impl flash does): per layer the "
        "forward copies Q, K, V into packed tensors and scatters the output into a zeroed one, the backward "
        "gathers the output gradient and scatters dQ, dK, dV into zeroed tensors; docs/model.md#attention-unpad"
    ))] = False
    moe_fp8_padding: Annotated[bool, Meta(description=(
        "precision fp8 with MoE layers whose token dispatcher does not pad the tokens per expert to the FP8 GEMM "
        "alignment (Megatron-Core alltoall, allgather or the flex dispatcher's DeepEP backend without "
        "moe_router_padding_for_quantization; the flex dispatcher's HybridEP backend pads in its dispatch): the "
        "experts copy their routed tokens into a padded "
        "tensor before FC1 and FC2's output out of it, and the backward the same for the gradients (Megatron-Core "
        "TEGroupedMLP with Transformer Engine Fp8Padding / Fp8Unpadding); docs/model.md#fp8-expert-padding"
    ))] = False
    moe_permute_fusion: Annotated[bool, Meta(description=(
        "the MoE token dispatcher permutes and unpermutes the tokens with Transformer Engine's fused kernels "
        "(Megatron-Core --moe-permute-fusion, moe_permute_fusion; set by the Megatron-Bridge MoE providers and "
        "recipes and the Megatron-LM MoE recipes). false: Megatron-Core's own default, the unfused path (an "
        "index_select of every token copy, a zero-filled output scatter-added into): per MoE layer and pass C + S "
        "rows more, C the copies and S their source tokens (alltoall n (k + 1) of the rank's n tokens); HybridEP "
        "permutes in its own kernel either way; docs/model.md#moe-permute-fusion"
    ))] = True
    pp_scatter_gather: Annotated[bool, Meta(description=(
        "pipeline sends split over the TP group (Megatron-LM's scatter/gather optimisation, Narayanan et al. 2021 "
        "section 4.1: --scatter-gather-tensors-in-pipeline, on by default from 72e4230bb5 (2021-02) until the "
        "pipeline moved into Megatron-Core at 3c92fa93b5 (2023-03)): without sequence parallelism each TP rank sends "
        "b s h / t of the activation (and of its gradient) and the receiver all-gathers it over TP. false: "
        "Megatron-Core (get_tensor_shapes), torchtitan and nanotron send each rank's whole [s, b, h], the SP shard "
        "[s/t, b, h] with sequence_parallel; docs/model.md#pp-comm"
    ))] = False
    overlap_p2p_comm: Annotated[bool, Meta(description=(
        "the interleaved pipeline's sends and receives are posted asynchronously and waited for just before use "
        "(Megatron-Core --overlap-p2p-communication, overlap_p2p_comm; set by NeMo 2's MegatronCommOverlapCallback "
        "and Megatron-Bridge's CommOverlapConfig whenever the virtual pipeline size is > 1): in the steady 1F1B "
        "phase each gradient send hides under the next forward chunk and, with overlap_p2p_send_wait false "
        "(Megatron-Core before 0.18), each activation send under the next backward chunk, never more than that "
        "chunk's free compute; the warm-up and cool-down sends stay exposed, and beside moe_a2a_overlap (the "
        "combined 1F1B, which waits both receives before the merged passes) nothing hides. Needs an interleaved "
        "schedule (Megatron-Core refuses it without one: not priced there, warning); docs/model.md#pp-comm-overlap"
    ))] = False
    overlap_p2p_send_wait: Annotated[bool, Meta(description=(
        "under overlap_p2p_comm, each steady-phase forward chunk's activation send is waited as soon as it is posted, "
        "so only the gradient sends hide (Megatron-Core from 260cba7133, 2026-04-16, core_v0.18.0: "
        "'wait for async P2P send before deallocating output tensor', where deallocate_pipeline_outputs, which "
        "Megatron-LM, NeMo 2 and Megatron-Bridge set); false: Megatron-Core before 0.18, each send waited one chunk "
        "later, both directions hide. No Megatron flag sets it (the version does: Megatron-LM hard-wires "
        "deallocate_pipeline_outputs), so the Megatron-LM reader leaves the default: set false for an older "
        "Megatron-Core; alone (without a priced overlap_p2p_comm) it is not priced, warning; "
        "docs/model.md#pp-comm-overlap"
    ))] = True
    eager_rope: Annotated[bool, Meta(description=(
        "RoPE runs as Megatron-Core's eager ATen kernels (rope_utils._apply_rotary_pos_emb_bshd: multiply, negate, "
        "concatenate, add), not the fused kernel layer_impl prices: Megatron-Core takes it with apply_rope_fusion "
        "off (--no-rope-fusion) or a YaRN concentration factor other than 1 (GPT-OSS); 10e + 12e bytes more per "
        "rotated Q/K element, forward + backward (multi-head latent attention: its RoPE part only, 12e + 19e, "
        "de-interleaved first; NeMo 25.04's DeepSeek-V3); docs/model.md#eager-layer-ops"
    ))] = False
    mla_column_down_proj: Annotated[bool, Meta(description=(
        "multi-head latent attention's Q and KV down-projections are tensor-parallel column linears, as Megatron-Core's"
        " Transformer Engine spec built them from 1c425a8313 (2025-02-24) to 720c8b40d8 (2025-07-29): core_v0.12.x and "
        "core_v0.13.x (NeMo 25.04's DeepSeek-V3), and its local spec still does (mla_down_proj_use_column_parallel): "
        "with sequence parallelism each gathers its h-wide input and then its output, six all-gathers of 2h + 2r_q + "
        "2r_kv + d_rope elements a token per attention block; false: duplicated down-projections (the TE spec before "
        "and from core_v0.14.0), three of r_q + r_kv + d_rope; docs/model.md#mla-tp"
    ))] = False
    eager_glu_clamp: Annotated[bool, Meta(description=(
        "the routed experts' gated activation is clamped by ATen kernels outside the fused activation (Megatron-Core "
        "weighted_bias_quick_geglu_impl with activation_func_clamp_value, GPT-OSS, without the Transformer Engine op "
        "fuser): two clamps and a concatenation forward, their autograd backward; docs/model.md#eager-layer-ops"
    ))] = False
    eager_expert_bias: Annotated[bool, Meta(description=(
        "the routed experts' FC2 bias is added, weighted by the router probability, one expert at a time in eager "
        "PyTorch (Megatron-Core TEGroupedMLP._apply_bias, add_bias_linear MoE without the Transformer Engine op fuser: "
        "GPT-OSS); docs/model.md#eager-layer-ops"
    ))] = False
    eager_bias_dropout_add: Annotated[bool, Meta(description=(
        "a model with linear biases adds the attention output's bias (and a dense MLP's) in Megatron-Core's unfused "
        "bias-dropout-add (bias_dropout_fusion false: x + bias, dropout and the residual add as separate eager "
        "kernels, GPT-OSS); 2e bytes more per residual-stream element and biased add, forward (+ the dropout's own "
        "pass with dropout); docs/model.md#eager-layer-ops"
    ))] = False
    eager_activation: Annotated[bool, Meta(description=(
        "the MLP's activation runs as Megatron-Core's eager ATen kernels, not the fused bias_swiglu / bias_gelu "
        "kernel layer_impl prices (bias_activation_fusion false: Megatron-LM --no-bias-swiglu-fusion / "
        "--no-bias-gelu-fusion); gated: silu, the glu_linear_offset add and the multiply forward, their autograd "
        "backward and chunk's concatenation, 4e F + 8e F bytes more per token (F the rank's MLP width; + 4e F with "
        "biases, the separate bias add); GeLU with biases: the bias add, 2e F; the dense MLP blocks only; "
        "docs/model.md#eager-activation"
    ))] = False
    fp8_wgrad: Annotated[bool, Meta(description=(
        "an fp8 delayed-scaling run's weight-gradient GEMMs run in FP8 (Megatron-Core TransformerConfig.fp8_wgrad); "
        "false: in 16 bits on the BF16 curve (Megatron-LM --no-fp8-wgrad: DelayedScaling override_linear_precision "
        "(False, False, True), which Transformer Engine 1.x honours and 2.x, whose recipe drops the argument, "
        "ignores); docs/model.md#fp8-wgrad"
    ))] = True
    tp_comm_overlap_ag: Annotated[bool, Meta(description=(
        "with tp_comm_overlap: the userbuffers all-gather overlaps (the column-parallel linears' forward input "
        "gathers, the row-parallel linears' output-gradient gathers); false: NCCL gathers, exposed (Megatron-LM "
        "--no-tp-comm-overlap-ag / --disable-tp-comm-overlap-ag); docs/model.md#tp-comm-parts"
    ))] = True
    tp_comm_overlap_rs: Annotated[bool, Meta(description=(
        "with tp_comm_overlap: the userbuffers pipelined reduce-scatters of the row-parallel linears' forward; false: "
        "NCCL reduce-scatters, exposed (Megatron-LM --no-tp-comm-overlap-rs); docs/model.md#tp-comm-parts"
    ))] = True
    tp_comm_bulk_dgrad: Annotated[bool, Meta(description=(
        "with tp_comm_overlap: the column-parallel linears' backward input re-gathers as userbuffers bulk overlaps "
        "beside the data-gradient GEMM; false: NCCL's asynchronous gather beside the same GEMM (Megatron-LM "
        "--no-tp-comm-bulk-dgrad); docs/model.md#tp-comm-parts"
    ))] = True
    tp_comm_bulk_wgrad: Annotated[bool, Meta(description=(
        "with tp_comm_overlap: the column-parallel linears' input-gradient reduce-scatters as userbuffers bulk "
        "overlaps beside the weight-gradient GEMM; false: NCCL's asynchronous reduce-scatter beside the same GEMM "
        "(Megatron-LM --no-tp-comm-bulk-wgrad); docs/model.md#tp-comm-parts"
    ))] = True
    moe_host_attention_graphed: Annotated[bool, Meta(description=(
        "with moe_layer_host_s: the run CUDA-graphs the MoE layers' attention (Megatron-Core cuda_graph_scope attn), "
        "so the graph, not the host, issues the attention block's eager RoPE and bias-dropout-add calls that "
        "eager_rope and eager_bias_dropout_add add to the host floor (the GLU clamp's and the expert bias's calls, "
        "after the dispatcher's synchronisation, stay); give moe_layer_host_s the expert path's share of H then "
        "(0.7151 H); docs/model.md#host-eager-ops"
    ))] = False
    train_metric_passes: Annotated[int, Meta(ge=0, le=MAX_TRAIN_METRIC_PASSES, description=(
        "eager cross-entropy evaluations of the logits after each micro-batch's backward, outside autograd: a "
        "trainer's training metrics (Composer runs every train metric on every micro-batch; llm-foundry's MPT has "
        "two, LanguageCrossEntropy and LanguagePerplexity); each reads the 16-bit logits three times and writes "
        "fp32 log-probabilities, 10 B a logit (docs/model.md#train-metrics); 0 = none"))] = 0
    train_metric_states: Annotated[int, Meta(ge=0, le=MAX_TRAIN_METRIC_STATES, description=(
        "scalar metric states a trainer gathers over all ranks once a step, with the GPU idle: Composer computes its "
        "train metrics after every batch, and torchmetrics' compute() runs a barrier and an all-gather into one "
        "tensor per rank for each state (llm-foundry's MPT: 4, LanguageCrossEntropy and LanguagePerplexity with "
        "sum_loss and total_items each); priced as the host's per-rank calls and the two collectives over the job's "
        "GPUs, in the host part (docs/model.md#train-metric-sync); 0 = none"))] = 0
    loss_dp_allreduce: Annotated[bool, Meta(description=(
        "each micro-batch's loss is averaged over the data-parallel group by a blocking all-reduce of one fp32 value "
        "on the last pipeline stage, before its backward (NeMo 1's MegatronGPTModel loss_func and NeMo 2 before "
        "58f6689700: average_losses_across_data_parallel_group; Megatron-LM's pretrain_gpt.py reporting loss before "
        "3806ec2754): its latency on the critical path m times a step, "
        "and the data-parallel replicas locked together every micro-batch (docs/model.md#loss-dp-allreduce)"
    ))] = False
    check_for_nan_in_grad: Annotated[bool, Meta(description=(
        "Megatron-Core DDP's DistributedDataParallelConfig.check_for_nan_in_grad (with megatron_ddp): each bucket's "
        "start_grad_sync takes the L2 norm of its whole gradient buffer on the compute stream and tests it for NaN "
        "and Inf on the host (rerun_state_machine.validate_result, a blocking device-to-host read each) before its "
        "reduce-scatter or all-reduce; priced as the buffer's bytes over HBM bandwidth plus two host round trips and "
        "launches a bucket, once a step, in the optimizer part (docs/model.md#nan-check). Megatron-LM's "
        "--no-check-for-nan-in-loss-and-grad turns it off (default on); NeMo 2's recipes set it, Megatron-Bridge's "
        "performance scripts unset it"))] = False
    check_for_nan_in_loss: Annotated[bool, Meta(description=(
        "the training loss function tests each micro-batch's loss for NaN and Inf on the host on the last pipeline "
        "stage, before its backward (Megatron-LM pretrain_gpt.py loss_func: rerun_state_machine.validate_result "
        "with torch.isnan, then torch.isinf, a blocking device-to-host read each); priced as two host round trips "
        "and launches a micro-batch, m a step, in the host part (docs/model.md#nan-check). Megatron-LM's "
        "--no-check-for-nan-in-loss-and-grad turns it off (default on); NeMo 2's training loss has no such check; "
        "Megatron-Bridge's performance scripts unset its rerun_state_machine.check_for_nan_in_loss"))] = False
    loss_token_count_read: Annotated[bool, Meta(description=(
        "the training loss function tests each micro-batch's valid-token count on the host on the last pipeline "
        "stage, before its backward (NeMo 2's MaskedTokenLossReduction from 1626ddded6 to 58f6689700, NeMo v2.2 and "
        "v2.3: ``if num_valid_tokens < 0.5`` on a CUDA tensor, a blocking device-to-host read); priced as one host "
        "round trip and launch a micro-batch, m a step, in the host part (docs/model.md#loss-token-count-read)"
    ))] = False
    defer_embedding_wgrad: Annotated[bool, Meta(description=(
        "Megatron-Core's defer_embedding_wgrad_compute: the last pipeline stage buffers the output layer's incoming "
        "gradients and skips their weight-gradient GEMM, then runs those GEMMs (each input all-gathered over TP under "
        "sequence parallelism) after its last backward, in the pipeline's cool-down; takes effect at pp > 1 only "
        "(Megatron-Core refuses it at pp 1) (docs/model.md#defer-embedding-wgrad)"
    ))] = False
    wgrad_deferral_limit: Annotated[int, Meta(ge=0, le=MAX_WGRAD_DEFERRAL_LIMIT, description=(
        "with defer_embedding_wgrad: the most micro-batches' output-layer weight-gradient GEMMs deferred a step "
        "(Megatron-Core wgrad_deferral_limit; the later ones run in their own backward); 0 = all of them"
    ))] = 0
    loss_impl: Annotated[LossImplText, Meta(description=(
        "the output head's softmax cross-entropy: megatron (Megatron-Core's unfused vocab_parallel_cross_entropy, "
        "Megatron-LM's default; also Megatron-DeepSpeed's), megatron_fused (--cross-entropy-loss-fusion, native), te "
        "(--cross-entropy-fusion-impl te, Transformer Engine's Triton kernel), flash_attn (flash-attn's Triton "
        "CrossEntropyLoss, llm-foundry's fused_crossentropy), torch (eager F.cross_entropy on logits.float(), "
        "torchtitan without TP), inductor (the same under torch.compile, torchtitan's with training.compile); its HBM "
        "bytes per logit, forward + backward at 16-bit logits: 38 + 14, 22 + 10, 6 + 4, 2 + 4, 22 + 26, 2 + 4 "
        "(docs/model.md#loss)"))] = "megatron"
    layer_impl: Annotated[LayerImplText, Meta(description=(
        "the implementation of a layer's memory-bound ops (norms, residual adds, dropout, activation, RoPE, the "
        "attention core's layout copies), whose HBM bytes per token are counted from its code: megatron_te "
        "(Megatron-Core with Transformer Engine, the default), megatron_legacy (Megatron-LM before Megatron-Core, "
        "Megatron-DeepSpeed), eager (PyTorch eager nn modules), llmfoundry (llm-foundry MPT, eager), torchtitan "
        "(torch.compile'd blocks), xla (MaxText), nanotron (Hugging Face nanotron's eager Llama layer), "
        "torchtitan_eager / torchtitan_eager_fused_rmsnorm (torchtitan's block without torch.compile, its RMSNorm as "
        "ATen ops / its Triton kernel), fms (IBM foundation-model-stack's eager LLaMA block); "
        "docs/model.md#layer-eltwise"))] = "megatron_te"
    assignment: Annotated[AssignmentText, Meta(
        description="micro-batches split equally up front, or pulled from a shared queue")] = "static"
    dispatch_overhead: Annotated[SecondsOrZero | None, Meta(description=(
        "scheduling cost per dynamically assigned task; default 1.02 ms, one synchronous Ray task round trip "
        "(Ray release microbenchmark single_client_tasks_sync, 980.7 tasks/s)"))] = None
    layout: Annotated[LayoutText, Meta(description=(
        "rank order of the parallel dimensions, innermost first: tp-cp-dp-pp (Megatron-LM's default, torchtitan) "
        "or tp-cp-pp-dp (PP inside DP, Megatron-LM --use-tp-pp-dp-mapping); docs/model.md#layout"))] = "tp-cp-dp-pp"

    def _check_offload_states(self, zero: Zero, unset: str, trainers: list[str]) -> None:
        """offload_states where a framework runs it (docs/model.md#state-offload): optimizer is DeepSpeed's
        offload_optimizer, "Valid for ZeRO stage 1, 2, 3"; optimizer+params its offload_param, "Valid only with stage
        3" (deepspeed/runtime/zero/config.py at deepspeedai/DeepSpeed@edaa7221), or PyTorch FSDP's CPUOffload, whose
        one mode moves the parameters, gradients and optimizer step together (so FSDP has no optimizer-only
        offload); neither under Megatron-Core's DDP, nanotron's trainer or Apex's DistributedFusedAdam (their own
        optimizers, whose host offload is not priced)."""
        mode = StateOffload.parse(self.offload_states)
        if mode == StateOffload.NONE:
            return
        if mode == StateOffload.OPTIMIZER and zero in (Zero.FSDP, Zero.HSDP):
            raise field_error("offload_states", f"optimizer with zero {self.zero}: PyTorch FSDP's CPUOffload moves "
                              "the parameters, gradients and optimizer step to the host together, it has no "
                              "optimizer-only mode", "optimizer+params with zero fsdp or hsdp; optimizer with zero 1, "
                              "2 or 3 (DeepSpeed's offload_optimizer)", also="zero")
        if mode == StateOffload.OPTIMIZER and zero == Zero.NONE:
            raise _zero_refusal("offload_states", f"optimizer needs DeepSpeed's ZeRO optimizer (offload_optimizer is "
                              f"valid for ZeRO stage 1, 2, 3){unset}", "optimizer with zero 1, 2 or 3",
                              zero=zero)
        if mode == StateOffload.PARAMS and zero < Zero.PARAMETERS:
            raise _zero_refusal("offload_states", f"optimizer+params needs the parameters sharded (DeepSpeed "
                              f"offload_param is valid only with stage 3; FSDP's CPUOffload){unset}",
                              "optimizer+params with zero 3, fsdp or hsdp; optimizer with zero 1 or 2",
                              zero=zero)
        other = trainers + (["bucket_fragments"] if self.bucket_fragments else [])
        if other:
            raise field_error("offload_states", f"{mode.label} is priced as DeepSpeed's and PyTorch FSDP's host "
                              f"offload; {other[0]} true names another framework's optimizer",
                              f"offload_states: none with {other[0]}, or {other[0]}: false")

    def _check(self) -> None:
        full_only = [f"recompute_layers={self.recompute_layers}"] if self.recompute_layers is not None else []
        if RecomputeMethod.parse(self.recompute_method) == RecomputeMethod.UNIFORM:
            full_only.append("recompute_method=uniform")
        if self.recompute_modules and full_only:
            # fuzz39: refused one field at a time, "add recompute: selective" for the modules, then "needs recompute:
            # full" for the layers, whatever recompute was (plan, which searches recompute, said the first). Megatron-
            # LM reads --recompute-modules under selective granularity only, and refuses a layer count or a method
            # there: validate_args asserts "recompute method is not yet supported for selective recomputing
            # granularity" (megatron/training/arguments.py L1425-1428 at d98e8a64dd) and TransformerConfig raises
            # "When using recompute_granularity: selective recompute_num_layers must be None" (megatron/core/
            # transformer/transformer_config.py L1926-1932 at d98e8a64dd)
            shown = self.recompute_modules if len(self.recompute_modules) <= 80 else self.recompute_modules[:77] + "..."
            raise field_error("recompute_modules", f"{shown!r} needs recompute: selective and "
                              f"{' and '.join(full_only)} needs recompute: full; no recompute mode takes both "
                              "(Megatron-LM refuses a layer count or a method under selective granularity)",
                              "recompute_modules with recompute: selective, or recompute_layers / recompute_method "
                              "with recompute: full; not both",
                              also="recompute_layers" if self.recompute_layers is not None else "recompute_method")
        if self.recompute_modules and Recompute.parse(self.recompute) != Recompute.SELECTIVE:
            shown = self.recompute_modules if len(self.recompute_modules) <= 80 else self.recompute_modules[:77] + "..."
            raise field_error("recompute_modules", f"{shown!r} needs recompute: selective (got {self.recompute!r})",
                              "add recompute: selective, or leave recompute_modules out", also="recompute",
                              needs_recompute=True)
        trainers = [n for n in ("megatron_ddp", "deepspeed_pipeline", "nanotron_trainer") if getattr(self, n)]
        if len(trainers) > 1:  # each names the framework whose data-parallel / pipeline engine runs the job: Megatron-
            # Core's DDP, DeepSpeed's PipelineEngine (its own engine's gradient sync), nanotron's trainer (torch DDP
            # or its ZeRO-1 optimizer); both were priced at once, one framework's terms added to the other's
            raise field_error(trainers[-1], f"true with {trainers[0]} true: a job runs on one framework's trainer "
                              f"({', '.join(trainers)} each name one)", "at most one of megatron_ddp, "
                              "deepspeed_pipeline and nanotron_trainer true")
        if self.main_grad_hook and (trainers or Zero.parse(self.zero) > Zero.GRADIENTS):
            # NeMo 1's O2 optimizers (zero 0: MainParamsOptimizerWrapper; 1/2: Apex DistributedFusedAdam) own their
            # main-gradient buffer; the other trainers and sharded-parameter wrappers price their own accumulation
            got = f"{trainers[0]} true" if trainers else f"zero {self.zero!r}"
            raise field_error("main_grad_hook", f"true prices NeMo 1's O2 main-gradient hook, which runs on neither "
                              f"another trainer nor sharded parameters (got {got})", "false (the default); true with "
                              "zero 0, 1 or 2 and megatron_ddp, deepspeed_pipeline and nanotron_trainer false")
        zero = Zero.parse(self.zero)
        # zero 0 is also what a strategy that never named zero gets: say so, and that zero is to be given too
        # (neither predict nor plan picks a ZeRO mode for a switch: FSDP and ZeRO-3 price different traffic)
        unset = f" (got zero {self.zero!r}{base.ZERO_DEFAULT if zero == Zero.NONE else ''})"
        if not self.fsdp_reshard_after_forward and zero < Zero.PARAMETERS:
            raise _zero_refusal("fsdp_reshard_after_forward", f"false needs the parameters sharded: zero 3, fsdp or "
                              f"hsdp{unset}", "true (the default) with zero 0, 1 or 2; false with zero 3, fsdp or "
                                              "hsdp", zero=zero)
        if self.fsdp_fp8_all_gather and zero not in (Zero.FSDP, Zero.HSDP):
            raise _zero_refusal("fsdp_fp8_all_gather", f"true needs PyTorch FSDP: zero fsdp or hsdp{unset}",
                              "false (the default) with zero 0, 1, 2 or 3; true with zero fsdp or hsdp",
                              zero=zero)
        if self.megatron_ddp and zero > Zero.OPTIMIZER:
            raise field_error("megatron_ddp", f"true needs Megatron-Core's DDP: zero 0 or 1 (its distributed "
                              f"optimizer; got zero {self.zero!r})", "false (the default) with any zero; true with "
                                                                     "zero 0 or 1", also="zero")
        if self.bucket_fragments and (zero not in (Zero.OPTIMIZER, Zero.GRADIENTS) or trainers):
            # Apex's DistributedFusedAdam (NeMo 1's distributed_fused_adam) reduce-scatters the gradients and
            # all-gathers the parameters (ZeRO-1/2) on its own: not ZeRO 0 / 3 / FSDP, nor under another trainer
            got = f" ({trainers[0]} true)" if trainers else unset
            what = f"true prices Apex's DistributedFusedAdam as NeMo 1 runs it, a ZeRO-1/2 optimizer of its own{got}"
            allowed = ("false (the default) with any zero; true with zero 1 or 2 and megatron_ddp, deepspeed_pipeline "
                       "and nanotron_trainer false")
            if trainers:
                raise field_error("bucket_fragments", what, allowed)
            raise _zero_refusal("bucket_fragments", what, allowed, zero=zero)
        self._check_offload_states(zero, unset, trainers)
        if self.deepspeed_pipeline and zero > Zero.OPTIMIZER:  # deepspeed/runtime/pipe/engine.py PipelineEngine
            raise field_error("deepspeed_pipeline", "true runs DeepSpeed's PipelineEngine, which asserts ZeRO stage "
                              "< 2 (\"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\"; got zero "
                              f"{self.zero!r})", "false (the default) with any zero; true with zero 0 or 1",
                              also="zero")
        if self.nanotron_trainer and zero > Zero.OPTIMIZER:  # nanotron@c2528430 helpers.py: zero_stage > 0 ->
            # ZeroDistributedOptimizer (optim/zero.py), which shards the optimizer states only
            raise field_error("nanotron_trainer", "true runs nanotron's trainer, whose ZeRO shards only the "
                              f"optimizer states (ZeRO-1, whatever its zero_stage > 0; got zero {self.zero!r})",
                              "false (the default) with any zero; true with zero 0 or 1", also="zero")
        if self.nanotron_trainer and (self.megatron_ddp or self.deepspeed_pipeline):
            # one trainer a job: nanotron builds torch's DDP or none (trainer.py init_model) and runs its own pipeline
            # engines (parallel/pipeline_parallel/engine.py), neither Megatron-Core's DDP nor DeepSpeed's PipelineEngine
            other = "megatron_ddp" if self.megatron_ddp else "deepspeed_pipeline"
            raise field_error("nanotron_trainer", f"true runs nanotron's trainer, which is not {other}'s framework "
                              f"(got {other} true too)", f"true with {other} false; or false")
        if self.nanotron_trainer and parse_schedule(self.schedule).kind not in (ScheduleKind.ONE_F_ONE_B,
                                                                                ScheduleKind.GPIPE):
            # nanotron@c2528430 config/utils_config.py: pp_engine "1f1b" (OneForwardOneBackwardPipelineEngine) or
            # "afab" (AllForwardAllBackwardPipelineEngine, GPipe's order), nothing else
            raise field_error("nanotron_trainer", "true runs nanotron's pipeline engines, 1f1b or afab (all forwards "
                              f"then all backwards), not schedule {self.schedule}",
                              "schedule 1f1b or gpipe with nanotron_trainer", also="schedule")
        for trainer, optimizer in SYNC_PARAM_GATHER.items():
            if getattr(self, trainer) and self.overlap_param_gather:
                raise field_error(trainer, f"true runs {optimizer} (got overlap_param_gather true: Megatron-LM's "
                                  "gather under the next forward)", f"overlap_param_gather false with {trainer}",
                                  also="overlap_param_gather")
        if trainers:
            refused = trainer_what_if_refusal(trainers[0], zero, self.dp_comm, self.sync, self.compression,
                                              self.algorithm, self.assignment)
            if refused:
                raise field_error(*refused)
        if self.nanotron_trainer and self.cp > 1:
            # nanotron@c2528430 ParallelismArgs has dp, pp, tp and expert_parallel_size: no context parallelism
            raise field_error("nanotron_trainer", f"true runs nanotron's trainer, which has no context parallelism "
                              f"(got cp {self.cp})", "cp 1 with nanotron_trainer", also="cp")
        if self.nanotron_trainer and self.tp_comm_overlap:
            # nanotron@c2528430 parallel/tensor_parallel/functional.py: its own async linears, no userbuffers
            raise field_error("nanotron_trainer", "true runs nanotron's tensor-parallel linears, which overlap only "
                              "their own all-gathers with a shard of the GEMM (got tp_comm_overlap true: Transformer "
                              "Engine's userbuffers)", "tp_comm_overlap false with nanotron_trainer",
                              also="tp_comm_overlap")
        if self.fp8_param_gather and zero not in (Zero.OPTIMIZER, Zero.GRADIENTS, Zero.FSDP, Zero.HSDP):
            raise _zero_refusal("fp8_param_gather", f"true needs a parameter all-gather: the distributed optimizer "
                              f"(zero 1 or 2) or Megatron-FSDP (zero fsdp or hsdp){unset}",
                              "false (the default), or true with zero 1, 2, fsdp or hsdp", zero=zero)
        if self.fp4_param_gather and zero not in (Zero.OPTIMIZER, Zero.GRADIENTS):
            # Megatron-Core's NVFP4 parameters are all-gathered by the distributed optimizer's buffers only
            # (param_and_grad_buffer.py nvfp4_packed_param_index_map; distrib_optimizer.py quantize_nvfp4_param_shard)
            raise _zero_refusal("fp4_param_gather", f"true needs the distributed optimizer's parameter all-gather "
                              f"(zero 1 or 2){unset}", "false (the default), or true with zero 1 or 2",
                              zero=zero)
        if self.fsdp_per_param and zero not in (Zero.FSDP, Zero.HSDP):
            raise _zero_refusal("fsdp_per_param", f"true needs PyTorch FSDP2: zero fsdp or hsdp{unset}",
                              "false (the default) with zero 0, 1, 2 or 3; true with zero fsdp or hsdp",
                              zero=zero)
        if self.fsdp_defer_grad_sync:
            if zero not in (Zero.FSDP, Zero.HSDP):  # DeepSpeed ZeRO 2/3 reduce in every backward (no no_sync)
                raise _zero_refusal("fsdp_defer_grad_sync", f"true needs PyTorch FSDP2: zero fsdp or hsdp{unset}",
                                  "false (the default) with zero 0, 1, 2 or 3; true with zero fsdp or hsdp",
                                  zero=zero)
            for other in ("fsdp_flat_param", "xla_gpu_lhs"):  # FSDP1's no_sync / XLA's program: not this schedule
                if getattr(self, other):
                    raise field_error("fsdp_defer_grad_sync", f"true prices FSDP2's deferred sync, not {other}'s",
                                      f"at most one of fsdp_defer_grad_sync and {other} true", also=other)
            # under a pipeline schedule (torch.distributed.pipelining, an FSDPModule a stage) each stage defers per
            # stage; the gathers a schedule repeats where forwards reshard depend on its order of forwards and
            # backwards (1F1B's warm-up forwards each gather again), so pp > 1 is priced with the parameters kept
            # gathered (torchtitan's default under PP; docs/model.md#fsdp-deferred-sync)
            if self.pp > 1 and self.fsdp_reshard_after_forward:
                raise field_error("fsdp_defer_grad_sync", f"true with pp {self.pp} is priced with "
                                  "fsdp_reshard_after_forward false (a pipeline stage's gathers with reshard after "
                                  "forward depend on the schedule's order of forwards and backwards)",
                                  "pp 1, or pp > 1 with fsdp_reshard_after_forward false", also="pp")
        if self.xla_gpu_lhs and zero not in (Zero.FSDP, Zero.HSDP):
            raise _zero_refusal("xla_gpu_lhs", f"true prices XLA's scheduling of the fsdp/hsdp collectives{unset}",
                              "false (the default), or true with zero fsdp or hsdp", zero=zero)
        if self.fsdp_per_param and self.fsdp_flat_param:
            raise field_error("fsdp_per_param", "true with fsdp_flat_param true: a model is wrapped by FSDP1 "
                              "(FlatParameter) or FSDP2 (per-parameter), not both",
                              "at most one of fsdp_flat_param and fsdp_per_param true")
        for torch_fsdp in ("fsdp_per_param", "fsdp_flat_param"):  # XLA compiles the JAX program: no PyTorch FSDP
            if self.xla_gpu_lhs and getattr(self, torch_fsdp):
                raise field_error("xla_gpu_lhs", f"true names a program compiled by XLA, not one wrapped by PyTorch "
                                  f"FSDP (got {torch_fsdp} true)", f"at most one of xla_gpu_lhs and {torch_fsdp} true")
        if self.xla_gpu_lhs and parse_compression(self.compression).label != "none":
            # XLA's all-reduces pass through no gradient-compression hook; its combine threshold counts their bytes
            raise field_error("xla_gpu_lhs", f"true prices XLA's own all-reduces, which no gradient compression hook "
                              f"reaches (got compression {self.compression!r})", "compression none with xla_gpu_lhs",
                              also="compression")
        if self.fsdp_flat_param and zero < Zero.GRADIENTS:
            raise _zero_refusal("fsdp_flat_param", f"true needs gradients sharded by FSDP: zero 2, 3, fsdp or "
                              f"hsdp{unset}", "false (the default) with zero 0 or 1; true with zero 2, 3, fsdp or "
                                              "hsdp", zero=zero)
        if self.bucket_size is not None and self.bucket_size < MIN_BUCKET_BYTES:
            raise field_error("bucket_size", f"{self.bucket_size:g} B is below the smallest bucket priced, 1 KiB",
                              "from 1 KiB (1024 B) up, e.g. 25MiB (PyTorch DDP's bucket_cap_mb default); or leave it "
                              "out for the framework's default")
        if self.attention_unpad and not self.flash_attention:
            raise field_error("attention_unpad", "true needs flash_attention true (the unpadded tokens feed "
                              "flash-attn's variable-length kernel)", "false (the default), or true with "
                                                                     "flash_attention true", also="flash_attention")
        if self.recompute_layers is not None and Recompute.parse(self.recompute) != Recompute.FULL:
            # at its field (was "strategy: recompute_layers=0 needs ...", at the strategy as a whole)
            raise field_error("recompute_layers", f"recompute_layers={self.recompute_layers} needs recompute: full "
                              f"(got {self.recompute!r})", "leave it out for selective or none", also="recompute",
                              needs_recompute=True)
        if RecomputeMethod.parse(self.recompute_method) == RecomputeMethod.UNIFORM and Recompute.parse(
                self.recompute) != Recompute.FULL:
            # round 17: dropped without a word (the method orders full recompute's checkpointed layers only)
            raise field_error("recompute_method", f"uniform needs recompute: full (got {self.recompute!r})",
                              "leave it out (block, the default) for selective or none, or add recompute: full",
                              also="recompute", needs_recompute=True)
        if self.recompute_layers == 0 and RecomputeMethod.parse(self.recompute_method) == RecomputeMethod.UNIFORM:
            # round 17: priced as full recompute of every layer. Megatron-Core's uniform method checkpoints chunks of
            # recompute_num_layers layers and advances by that count (megatron/core/recompute.py L158-166 at
            # d98e8a64dd): a chunk of 0 never ends
            raise field_error("recompute_layers", "0 with recompute_method uniform: uniform checkpoints chunks of N "
                              "layers and a chunk of 0 layers never ends (Megatron-Core's uniform loop)",
                              "1 or more with uniform (1: every layer checkpointed), 0 with recompute_method block "
                              "(no layer recomputed), or leave it out for every layer")

    @property
    def parsed_schedule(self) -> Schedule:
        return parse_schedule(self.schedule)

    @property
    def virtual_stages(self) -> int:
        return self.parsed_schedule.virtual_stages

    @property
    def schedule_kind(self) -> str:
        return self.parsed_schedule.kind.label


#: What each framework trainer flag names, for the refusals of :func:`trainer_what_if_refusal`.
TRAINER_NAMES = {"megatron_ddp": "Megatron-Core's DDP", "deepspeed_pipeline": "DeepSpeed's PipelineEngine",
                 "nanotron_trainer": "nanotron's trainer"}
#: The trainers whose ZeRO-1 optimizer all-gathers the updated parameters synchronously right after its step, which
#: nothing defers to the next forward as Megatron-LM's --overlap-param-gather does (that switch would price the
#: gather under the next forward): StrategySpec refuses overlap_param_gather beside them.
SYNC_PARAM_GATHER = {
    # DeepSpeed v0.19.5 deepspeed/runtime/zero/stage_1_and_2.py step() L2367-2370: all_gather_dp_groups, "ready for
    # next round forward"
    "deepspeed_pipeline": "DeepSpeed's ZeRO-1 optimizer, which all-gathers the updated parameters synchronously at "
                          "the end of its step",
    # nanotron@c2528430 optim/zero.py ZeroDistributedOptimizer.step: _all_gather_params, one all_gather_coalesced
    # right after the update
    "nanotron_trainer": "nanotron's ZeRO-1 optimizer, which all-gathers the updated parameters synchronously after "
                        "its step",
}


def trainer_sync_refusal(trainer: str, zero: int | None, sync: Any) -> str:
    """Why ``trainer`` (a :data:`TRAINER_NAMES` flag) cannot run sync mode ``sync`` at ZeRO stage ``zero`` (None:
    not known, plan's search), "" when it can. All three are synchronous data parallelism, every rank stepping one
    replica after one gradient sync a step (bsp): none has backup workers, asynchronous or stale-synchronous updates,
    local SGD, or groups that step apart (hier:G, hier:G:H with H > 1). The one two-level sync one of them runs is
    Megatron-Core's partial distributed optimizer (--num-distributed-optimizer-instances, DDP config
    num_distributed_optimizer_instances): the gradients are reduce-scattered inside each instance and the shard
    all-reduced across instances every step (megatron/core/distributed/param_and_grad_buffer.py start_grad_sync
    L687-760 at NVIDIA/Megatron-LM@d98e8a64dd, "With multiple DistOpt instances, we need to all-reduce across
    instances"), hier:G:1 at zero 1; its DDP config asserts use_distributed_optimizer with it (L230-235), so zero 0 is
    refused."""
    mode = parse_sync(sync, where="")
    if mode.kind == SyncKind.BSP:
        return ""
    if trainer == "megatron_ddp" and mode.kind == SyncKind.HIER and mode.period == 1:
        if zero is None or zero == Zero.OPTIMIZER:
            return ""
        return (f"{mode.label()} with megatron_ddp is Megatron-Core's partial distributed optimizer "
                f"(--num-distributed-optimizer-instances), which needs the distributed optimizer: zero 1 (got zero "
                f"{int(zero)})")
    return (f"{mode.label()} with {trainer}: {TRAINER_NAMES[trainer]} runs synchronous data parallelism, one "
            "gradient sync a step (bsp)")


def trainer_what_if_refusal(trainer: str, zero: int | None, dp_comm: Any, sync: Any, compression: Any,
                            algorithm: Any, assignment: Any = "static") -> tuple[str, str, str] | None:
    """(field, what was wrong, what is allowed) where ``trainer`` (megatron_ddp, deepspeed_pipeline or
    nanotron_trainer) is asked to run a data-parallel what-if its framework has no code for; None when it runs them.
    The three sync gradients with torch.distributed collectives on NCCL (Megatron-Core DDP: all-reduce or
    reduce-scatter of its buckets, param_and_grad_buffer.py start_grad_sync @d98e8a64dd; DeepSpeed: its engine's
    allreduce_gradients and ZeRO-1's reduce, deepspeed/runtime/engine.py @edaa72212; nanotron: torch DDP or one
    all_reduce of the fp32 buffer, helpers.py / optim/gradient_accumulator.py @2411b022). So, per mode:

    - dp_comm ps:K: none has a parameter server: refused.
    - sync: :func:`trainer_sync_refusal`.
    - compression int8 / topk: none quantises or sparsifies gradients on the wire (DeepSpeed's 1-bit optimizers are
      other optimizers, not a codec of its engine's all-reduce): refused. fp16/bf16 (gradients cast to 16 bits for
      the sync) is kept for deepspeed_pipeline: DeepSpeed's communication_data_type (engine.py L1404-1416; its ZeRO
      optimizer takes it, L2430, and so does the fallback all-reduce of its buckets) casts them. Megatron-Core's DDP
      and nanotron reduce the gradient buffer in its own dtype (Megatron's main_grad buffer, fp32 with
      --accumulate-allreduce-grads-in-fp32; nanotron's fp32 accumulation buffer or DDP's 16-bit gradients), with no
      cast before the collective: refused there (on 16-bit gradients it changes nothing; the wire's width is the
      gradient element's, training.grad_bytes_per_param).
    - algorithm: ring and tree are kept, NCCL_ALGO=Ring|Tree chooses them under any of the three (NCCL picks
      itself otherwise: auto); rhd, rd, direct and hierarchical are algorithms NCCL does not implement (planner
      MAINSTREAM), so none of the three can run them: refused.
    - assignment dynamic (micro-batches pulled from a shared queue): each splits the global batch over the DP ranks
      up front by its data sampler (Megatron's MegatronPretrainingSampler, DeepSpeed's DistributedSampler / Megatron-
      DeepSpeed's, nanotron's get_sampler): refused."""
    name = TRAINER_NAMES[trainer]
    if parse_dp_comm(dp_comm).servers:
        return ("dp_comm", f"{parse_dp_comm(dp_comm).label} with {trainer}: {name} has no parameter server (it "
                           "all-reduces or reduce-scatters the gradients over NCCL)",
                f"dp_comm allreduce with {trainer}")
    why = trainer_sync_refusal(trainer, zero, sync)
    if why:
        return ("sync", why, "bsp" + (", or hier:G:1 with zero 1 (partial distributed optimizer)"
                                      if trainer == "megatron_ddp" else "") + f" with {trainer}")
    comp = parse_compression(compression)
    # the value as written: bf16 parses to the fp16 kind (the same 2-byte wire), and was named "fp16" (review17f)
    shown = compression.strip() if isinstance(compression, str) and compression.strip() else comp.label
    if comp.kind == CompressionKind.FP16 and trainer != "deepspeed_pipeline":
        return ("compression", f"{shown} with {trainer}: {name} reduces the gradients in their own dtype (no cast "
                               "before the collective)", f"none with {trainer} (the wire carries the gradient element: "
                                                         "training.grad_bytes_per_param 2 for 16-bit gradients)")
    if comp.kind in (CompressionKind.INT8, CompressionKind.TOPK):
        return ("compression", f"{shown} with {trainer}: {name} sends the gradients unquantised (no int8 or "
                               "top-k codec on its gradient sync)",
                f"none{' or fp16/bf16' if trainer == 'deepspeed_pipeline' else ''} with {trainer}")
    algo = Algorithm.parse(algorithm)
    if algo not in (Algorithm.AUTO, Algorithm.RING, Algorithm.TREE):
        return ("algorithm", f"{algo.label} with {trainer}: {name} syncs the gradients with NCCL, which has no "
                             f"{algo.label} algorithm (NCCL_ALGO picks Ring or Tree)",
                f"auto, ring or tree with {trainer}")
    if Assignment.parse(assignment) == Assignment.DYNAMIC:
        return ("assignment", f"dynamic with {trainer}: {name} splits each global batch over the data-parallel ranks "
                              "up front (its data sampler), no shared queue", f"static with {trainer}")
    return None


def _not_fp8(precision: str) -> str:
    """What an fp8-only training field allows in a run of another precision: an fp4 run was told to "leave it out
    for 16- and 32-bit runs" (fuzz23), which it is not."""
    fp4 = Precision.parse(precision) == Precision.FP4
    return "precision fp8, or leave it out" + (" (an fp4 run is NVFP4: no fp8 recipe)" if fp4 else "")


def low_precision_recipe(training: Any, acc: Any) -> str:
    """The Transformer Engine scaling recipe of a low-precision run ("" for 16- and 32-bit runs): an fp8 run's
    training.fp8_recipe, else Megatron-Core's default 'delayed' (TransformerConfig.fp8_recipe); an fp4 run's
    'nvfp4' (NVFP4BlockScaling, TE's one FP4 recipe; Megatron-Core --fp4-recipe nvfp4). MXFP8 and NVFP4 need
    Blackwell tensor cores: Transformer Engine's check_mxfp8_support and check_nvfp4_support
    (pytorch/quantization.py at NVIDIA/TransformerEngine@d0067d0da6) refuse them below compute capability 10.0."""
    if Precision.parse(training.precision) == Precision.FP4:
        if acc.family != "blackwell":
            # a chip with FP4 matrix cores of its own (MI355X: MXFP4, its catalog fp4 peak) still runs no NVFP4
            own = "fp4" in (getattr(acc, "peak_flops", None) or {})
            note = (f" (its fp4 peak is its own FP4 format, e.g. MXFP4 on CDNA4, not NVFP4; no FP4 training recipe "
                    f"is priced for {acc.family})") if own else ""
            # an A100 / V100 (no fp8 peak) was offered "bf16, fp16 or fp8", and --precision fp8 is refused there
            fp8 = "fp8" in (getattr(acc, "peak_flops", None) or {})
            raise InputError(f"precision fp4 (NVFP4) needs Blackwell tensor cores; {acc.name} is {acc.family}{note}",
                             where="training.precision",
                             allowed=f"{'bf16, fp16 or fp8' if fp8 else 'bf16 or fp16'} on this accelerator")
        return "nvfp4"
    if Precision.parse(training.precision) != Precision.FP8:
        return ""
    recipe = getattr(training, "fp8_recipe", None) or "delayed"
    rowwise_here = acc.family in ROWWISE_FP8_FAMILIES
    # what the accelerator runs instead: a chip without an fp8 peak (A100, V100) runs no FP8 recipe at all
    fp8_here = "fp8" in (getattr(acc, "peak_flops", None) or {})
    blockwise_here = acc.family == "hopper"
    instead = (((("delayed, tensorwise, blockwise, rowwise or rowwise_with_gw_hp" if blockwise_here else
                  "delayed, tensorwise, rowwise or rowwise_with_gw_hp") if rowwise_here else "delayed or tensorwise")
                + " on this accelerator") if fp8_here else f"precision bf16 ({acc.name} has no fp8 peak)")
    if recipe == "mxfp8" and acc.family != "blackwell":
        raise InputError(f"fp8 recipe mxfp8 needs Blackwell tensor cores; {acc.name} is {acc.family}",
                         where="training.fp8_recipe", allowed=instead)
    if recipe == "blockwise" and not blockwise_here:
        # TE runs Float8BlockScaling's GEMMs on cuBLASLt's VEC128 / BLK128x128 scale modes, which exist on sm_90
        # only; on Blackwell TE 2.8+ converts the operands to MXFP8 (TransformerEngine#2157), not priced here
        raise InputError(f"fp8 recipe blockwise (Float8BlockScaling) is priced on Hopper's cuBLASLt block-scaled "
                         f"GEMMs only; {acc.name} is {acc.family}", where="training.fp8_recipe",
                         allowed=instead + (" (mxfp8 on Blackwell)" if acc.family == "blackwell" else ""))
    if recipe in ROWWISE_FP8_RECIPES and not rowwise_here:
        raise InputError(f"fp8 recipe {recipe} runs torch._scaled_mm's row-wise kernel, which PyTorch has for NVIDIA "
                         f"Hopper / Blackwell (CUTLASS) and AMD CDNA3 / CDNA4 (hipBLASLt) only; {acc.name} is "
                         f"{acc.family}", where="training.fp8_recipe", allowed=instead)
    return str(recipe)


def module_precisions(training: Any, sh: Any, acc: Any) -> dict[str, str]:
    """training.module_precision as module name -> precision (bf16 | mxfp8), only the modules the model has: a
    module the workload lacks (moe_latent without moe.latent_size, mamba_out_proj without Mamba layers, mtp without
    MTP layers, attention_proj without attention layers) or mxfp8 off Blackwell is an input error. Empty for a
    16-/32-bit run or when not given."""
    spec = getattr(training, "module_precision", None)
    named = spec.named() if spec is not None else {}
    if not named:
        return {}
    where = "training.module_precision."
    if sh is None:
        k = next(iter(named))
        raise InputError(f"{k} names a transformer module; a generic workload has none", where=where + k,
                         allowed="leave module_precision out for a generic workload")
    hy = getattr(sh, "hybrid", None)
    has = {"attention_proj": (hy is None or hy.attention > 0, "no attention layers"),
           "moe_latent": (float(np.max(sh.moe_latent)) > 0 and float(sh.moe_layers) > 0, "no LatentMoE "
                          "(moe.latent_size not set)"),
           "mamba_out_proj": (hy is not None and hy.mamba > 0, "no Mamba layers"),
           "mtp": (float(sh.mtp_layers) > 0, "no multi-token prediction layers")}
    for k, v in named.items():
        ok, why = has[k]
        if not ok:
            raise InputError(f"the model has {why}", where=where + k,
                             allowed="only modules the model has: " + ", ".join(m for m in has if has[m][0]))
        if v == "mxfp8" and acc.family != "blackwell":
            raise InputError(f"mxfp8 needs Blackwell tensor cores; {acc.name} is {acc.family}", where=where + k,
                             allowed="bf16 on this accelerator")
    return named


def bf16_layer_share(training: Any, sh: Any) -> float:
    """training.bf16_layers over the transformer's layers (0 when none are kept in BF16). More layers than the model
    has, or any on a generic workload, is an input error."""
    n = int(getattr(training, "bf16_layers", 0) or 0)
    if not n:
        return 0.0
    if sh is None:
        raise InputError(f"bf16_layers {n} keeps transformer layers in BF16; a generic workload has none",
                         where="training.bf16_layers", allowed="0 for a generic workload")
    layers = int(sh.layers)
    if n > layers:
        raise InputError(f"bf16_layers {n} is more than the model's {layers} layers", where="training.bf16_layers",
                         allowed=f"0 to {layers}")
    return n / layers


def learned_positions_fit(training: Any, workload: Any) -> None:
    """A learned absolute position table (workload ``position_embeddings``, rows) holds one row a position: a run's
    sequence (training.seq_len, else the model's) longer than the table has no row for its last positions, and the
    frameworks refuse it: Megatron-LM validate_args asserts ``args.max_position_embeddings >= args.seq_length``
    (NVIDIA/Megatron-LM@307dcf37 megatron/training/arguments.py), and HF's GPT-2 / OPT index their ``wpe`` /
    ``embed_positions`` table past its end. A sequence of 8192 on GPT-2's 1024 rows was priced (fuzz24)."""
    rows = int(getattr(workload, "position_embeddings", 0) or 0)
    seq = int(getattr(training, "seq_len", None) or getattr(workload, "seq_len", 0) or 0)
    if rows and seq > rows:
        raise InputError(f"{seq} is longer than the model's learned position table of {rows} rows (position_"
                         "embeddings): no position past it has an embedding", where="training.seq_len",
                         allowed=f"a seq_len of at most {rows}, or a model with a table of as many rows")


#: The first Megatron-Core release whose attention sets ``set_save_original_input(self.linear_proj)`` for each recipe
#: (training.proj_original_input; docs/model.md#proj-original-input): fp8 other than delayed from core_v0.14.0
#: (NVIDIA/Megatron-LM 781e765818, cherry-picked as 08814e8f3b; ``config.fp8 and config.fp8_recipe != 'delayed' and
#: is_te_min_version("2.6.0dev0")``, its pyproject ``transformer-engine[pytorch]>=2.6.0a0``), fp4 from core_v0.16.0
#: (e8b9df156d, 2025-11-18, "Support NVFP4 MOE with Proper Padding": ``or (self.config.fp4 and
#: is_te_min_version("2.7.0.dev0"))``, absent from core_v0.15.0; 0.16's pyproject requires TE >= 2.9.0a0).
#: attention.py lines 428-444 at NVIDIA/Megatron-LM@d98e8a64dd.
PROJ_ORIGINAL_INPUT_SINCE: dict[str, tuple[int, int]] = {
    "tensorwise": (0, 14), "mxfp8": (0, 14), "blockwise": (0, 14), "nvfp4": (0, 16)}


def proj_original_input_recipes(training: Any) -> tuple[str, ...]:
    """The recipes under which the attention's linear_proj keeps its 16-bit input (training.proj_original_input,
    training.megatron_core_release; docs/model.md#proj-original-input): false, none; unset, those the release has
    (:data:`PROJ_ORIGINAL_INPUT_SINCE`; none without a release); true, those the release has, or every one of them
    without a release (the current Megatron-Core's)."""
    flag = getattr(training, "proj_original_input", None)
    release = getattr(training, "megatron_core_release", None)
    if flag is False or (flag is None and release is None):
        return ()
    if release is None:
        return tuple(PROJ_ORIGINAL_INPUT_SINCE)
    key = tuple(int(part) for part in release.split("."))[:2]
    return tuple(r for r, since in PROJ_ORIGINAL_INPUT_SINCE.items() if key >= since)


def xla_later_partitioner(training: Any) -> bool:
    """Whether the run's XLA SPMD partitioner is the later one (training.jax_release; docs/model.md#xlaver36): from
    jaxlib 0.4.29 the weight-gradient dot of a tensor-parallel attention projection gathers its narrower head-side
    operand (dQ, dK, dV, the attention output), up to 0.4.28 its h-wide one (xla/service/spmd/dot_handler.cc
    ``PartitionDot``'s cost-ordered strategies; measured on CPU GSPMD with jaxlib 0.4.20, 0.4.23, 0.4.26, 0.4.28
    (earlier) and 0.4.29, 0.4.30, 0.4.37 (later): docs/model.md#xlabwd36, #xlaver36); 0.4.27, between two measured
    earlier ones, and any release before 0.4.20 (no row at tensor > 1 states one but PaLM's 2022 XLA, two years
    before the change) are taken as the earlier. Unset: True, the current releases' partitioner (a what-if on a new
    install)."""
    release = getattr(training, "jax_release", None)
    return release is None or tuple(int(part) for part in release.split(".")) >= JAX_LATER_PARTITIONER_FIRST


def cudnn_release_held(training: Any, acc: Any) -> str | None:
    """The ``attention_releases`` key that prices the run's cuDNN release (training.cudnn_release; None when unset):
    the nearest release the accelerator holds **at or below** it, by (major, minor) (a patch, 9.21.1, prices as its
    release 9.21), so no run is priced on a later kernel than it had (docs/model.md#cudnn-release). A release older
    than every one held, or any release on an accelerator that holds none, is an input error naming the ones it
    holds: the default curve (attention_efficiency) is not taken in its place, since where releases are held it is
    a fit at one of them (b200's: the 9.10 / 9.13 sweeps), a later kernel than such a run had; leaving the field
    out takes it knowingly."""
    release = getattr(training, "cudnn_release", None)
    if release is None:
        return None
    held = acc.attention_releases or {}
    have = sorted(held, key=cudnn_release_key)
    at_or_below = [r for r in have if cudnn_release_key(r) <= cudnn_release_key(release)]
    if at_or_below:
        return at_or_below[-1]
    # a bare YAML number loses a trailing zero (9.20 reads as 9.2): hinted where the tenfold reading is a release that
    # would be priced and lies within the held ones (at or below the latest: '9.5' is no bare 9.50, a release past
    # every published sweep); it was given only where that reading is itself held, so a bare 9.20 (NeMo 26.04's cuDNN)
    # was refused without it once every release at or above the earliest held one was priced (review 15a)
    major_minor = release.split(".")
    tenfold = f"{release}0"
    bare_number_hint = (f" (a bare {tenfold} reads as {release}: quote it)"
                        if have and len(major_minor) == 2 and len(major_minor[1]) == 1
                        and cudnn_release_key(have[0]) <= cudnn_release_key(tenfold) <= cudnn_release_key(have[-1])
                        else "")
    held_text = f"releases held: {', '.join(have)}, all later" if have else "it holds no per-release curves"
    raise InputError(f"no attention curve for cuDNN {release} on {acc.name}{bare_number_hint} ({held_text})",
                     where="training.cudnn_release",
                     allowed=(f"a release at or above {have[0]} (priced on the nearest held at or below it), or leave "
                              "it out for the default curve" if have else
                              "leave it out (the default curve, attention_efficiency)"))


def cudnn_release_curves(training: Any, acc: Any) -> dict[str, Any]:
    """The accelerator's curves for the run's cuDNN release (training.cudnn_release; {} when unset): the
    ``attention_releases`` entry :func:`cudnn_release_held` picks, fitted to that release's own sweep. Only the cudnn
    kernel takes it."""
    key = cudnn_release_held(training, acc)
    return {} if key is None else dict(acc.attention_releases[key])


def check_attention_kernel(training: Any, acc: Any) -> None:
    """A named training.attention_kernel (not auto or gemm) the accelerator has no fitted curve for
    (``attention_efficiency``) is an input error naming the kernels it has (engine.job._attention_kernel prices the
    rest; checked before it too, by the commands, to name where the kernel was written: a launch's
    --attention-backend fused on an A100 was refused as "training.attention_kernel")."""
    name = str(getattr(training, "attention_kernel", "auto") or "auto")
    curves = acc.attention_efficiency or {}
    if name not in ("auto", "gemm") and name not in curves:
        have = ", ".join(sorted(curves)) or "none"
        raise InputError(f"no fitted {name} attention curve for {acc.name} (fitted: {have})",
                         where="training.attention_kernel",
                         allowed=f"auto, gemm{''.join(', ' + k for k in sorted(curves))}")


def check_derived_batch(tr: Any, st: Any, gpus: int, where: str | None, batch: str = "--global-batch") -> None:
    """Refuse a global batch derived as dp x micro-batch (no global batch given) beyond the bound of a given one
    (:data:`~scalemodel.specs.base.MAX_SPEC_INT`, commands.options.MAX_BATCH): ``predict --micro-batch 100000000`` at
    64 GPUs was priced at 6.4e9 sequences per step, where ``--global-batch 6400000000`` and ``scale`` refuse it.
    ``where``: where the micro-batch was written; ``batch``: how a global batch is given there. In specs, not
    commands, so that a sweep's fixed points take it too (they priced it)."""
    if tr.global_batch is not None:
        return
    mp = max(int(st.tp) * int(st.pp) * int(st.cp), 1)
    dp = int(st.dp) if st.dp else max(gpus // mp, 1)
    if dp * int(tr.micro_batch) > MAX_SPEC_INT:
        raise InputError(f"micro-batch {tr.micro_batch:,} x dp {dp:,} = {dp * int(tr.micro_batch):,} sequences per "
                         f"step (the global batch when none is given) is beyond the largest global batch "
                         f"({MAX_SPEC_INT:.0e})", where=where or "--micro-batch",
                         allowed=f"a micro-batch of at most {MAX_SPEC_INT // dp:,} at dp {dp:,} (micro-batch x dp up "
                                 f"to {MAX_SPEC_INT:.0e}), or a {batch}")
