"""The vocabulary: every enumerated strategy choice, named, coded and parsed once.

Specs validate through these parsers, the engine and the planner put the integer codes into numpy
arrays (an :class:`~enum.IntEnum` member *is* its code, so ``grid.zero >= Zero.THREE`` works on
arrays), and reports turn codes back into the canonical spelling with ``Member.label``. Adding a
choice means adding a member here and the formula that prices it; nothing else keeps a table of
names or codes. Each bad spelling gets one error text, raised as :class:`InputError`.

Parameterised choices (``interleaved:V``, ``topk:FRACTION``, ``ps:K[:colocated]``, ``hier:G[:H]``,
``backup:B``, ...) parse into small frozen msgspec Structs that carry the kind and its parameters (built in C:
a frozen dataclass compiles its generated methods at import, ~3 M instructions each, ~1% of ``import numpy``).
"""

from __future__ import annotations

import math
import re
from enum import Enum, IntEnum
from typing import Any, TypeVar

import msgspec
import numpy as np

from scalemodel.errors import InputError, written

C = TypeVar("C", bound="Choice")

#: Tier link labels (``TierSpec.protocol``, any case) by NCCL's link class: its NVLink row (ICI marks a TPU pod), its
#: PCI row, and the network links; "" is unlabelled (the innermost tier NVLink-class, the others network). The spec
#: refuses any other label (KNOWN_PROTOCOLS); cost/nccl.py prices by the classes.
NVLINK_LINKS = ("nvlink", "nvswitch", "xgmi", "infinity-fabric", "ici", "c2c")
PCI_LINKS = ("pcie", "pci")
NETWORK_LINKS = ("rdma", "ib", "infiniband", "roce", "efa", "tcp", "ethernet", "dcn")
NVLINK_CLASS = frozenset(NVLINK_LINKS)
PCI_CLASS = frozenset(PCI_LINKS)
NETWORK_PROTOCOLS = frozenset(NETWORK_LINKS)
KNOWN_PROTOCOLS = NVLINK_CLASS | PCI_CLASS | NETWORK_PROTOCOLS | {""}
#: The labels as the tier spec's description and its error list them (in the order above, by class).
PROTOCOL_LABELS = (f"{', '.join(NVLINK_LINKS)} (NCCL's NVLink class), {', '.join(PCI_LINKS)} (its PCI class), "
                   f"{', '.join(NETWORK_LINKS)} (a network link)")
#: The classes NCCL prices by its NVLink or PCI row, not the NET row (cost/nccl.py); per GPU, never a node NIC.
INTRA_PROTOCOLS = NVLINK_CLASS | PCI_CLASS



class Choice(IntEnum):
    """An enumerated choice: an integer code, a canonical label and accepted aliases."""

    label: str
    aliases: tuple[str, ...]
    #: numpy asks each operand's type for ``__array_ufunc__`` (``grid.zero >= Zero.THREE``), and an Enum class answers
    #: a missing attribute in Python (EnumType.__getattr__ raising AttributeError): ~4 us of a ~2 us comparison, ~600
    #: times an evaluate(). ndarray's own is the one numpy reads as no override: the same arithmetic, found at once.
    __array_ufunc__ = np.ndarray.__array_ufunc__

    def __new__(cls, code: int, label: str, *aliases: str) -> Choice:
        obj = int.__new__(cls, code)
        obj._value_ = code
        obj.label = label
        obj.aliases = aliases
        return obj

    @classmethod
    def of(cls: type[C], code: Any) -> C:
        """The member whose integer code is ``code`` (a number or a 0-d array element)."""
        return cls(int(code))  # type: ignore[call-arg]

    @classmethod
    def noun(cls) -> str:
        return cls.__name__.lower()

    @classmethod
    def labels(cls) -> list[str]:
        return [m.label for m in cls]

    @classmethod
    def allowed(cls) -> str:
        names = cls.labels()
        return "use " + (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0])

    @classmethod
    def parse(cls: type[C], value: Any, where: str = "") -> C:
        """The member spelled ``value`` (label or alias, case-insensitive; a member passes through)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            text = value.strip().lower()
            for m in cls:
                if text == m.label or text in m.aliases:
                    return m
        raise InputError(f"unknown {cls.noun()} {written(value)}", where=where, allowed=cls.allowed())

    @classmethod
    def normalize(cls, value: Any) -> str:
        """Canonical label of ``value`` (for spec validators that keep the text form)."""
        return cls.parse(value).label


class Precision(Choice):
    """Training precision of the GEMMs (and 16-bit activations under fp8 and fp4, as Transformer Engine). fp4 is
    NVFP4 training (Transformer Engine's NVFP4BlockScaling, the one FP4 recipe; Megatron-Core ``--fp4-format e2m1
    --fp4-recipe nvfp4``, Megatron-Bridge ``bf16_with_nvfp4_mixed``): docs/model.md#nvfp4."""

    FP32 = 0, "fp32"
    TF32 = 1, "tf32"
    BF16 = 2, "bf16"
    FP16 = 3, "fp16"
    FP8 = 4, "fp8"
    FP4 = 5, "fp4", "nvfp4", "bf16_with_nvfp4_mixed"

    @property
    def element_bytes(self) -> float:
        """Bytes of an activation or weight element in compute (fp8 GEMMs keep 16-bit activations)."""
        return 4.0 if self in (Precision.FP32, Precision.TF32) else 2.0

    @property
    def gradient_bytes(self) -> float:
        """Default bytes of a communicated gradient element: fp32 for fp32/tf32 runs, else 16-bit."""
        return 4.0 if self in (Precision.FP32, Precision.TF32) else 2.0


class Fp8Recipe(Choice):
    """An FP8 scaling recipe: Transformer Engine's, by Megatron-Core's --fp8-recipe names (TransformerConfig.fp8_recipe,
    default 'delayed'): DelayedScaling, Float8CurrentScaling (per-tensor current scaling), MXFP8BlockScaling,
    Float8BlockScaling ('blockwise': DeepSeek-V3's 1x128 activation / 128x128 weight tiles, Hopper); and
    torchao's float8 row-wise recipes (Float8LinearRecipeName ROWWISE, ROWWISE_WITH_GW_HP: torchtitan
    --float8.recipe_name), one scale per row of each GEMM operand, the second with the weight-gradient GEMM in BF16."""

    DELAYED = 0, "delayed"
    TENSORWISE = 1, "tensorwise", "current", "fp8-cs", "fp8_cs"
    MXFP8 = 2, "mxfp8", "fp8-mx", "fp8_mx"
    ROWWISE = 3, "rowwise"
    ROWWISE_GW_HP = 4, "rowwise_with_gw_hp"
    BLOCKWISE = 5, "blockwise"

    @classmethod
    def noun(cls) -> str:
        return "fp8 recipe"

    @classmethod
    def allowed(cls) -> str:
        """The recipes with the aliases each is read from. An alias is read as its recipe and echoed by the recipe's
        name (``current`` as ``tensorwise``), as every choice's alias is (precision ``nvfp4`` as ``fp4``): one
        spelling per recipe in ``--json`` and in the engine's comparisons; the refusal lists them so that the echo is
        no surprise (review24b)."""
        names = [m.label + (f" (alias{'es' if len(m.aliases) > 1 else ''} {', '.join(m.aliases)})" if m.aliases else "")
                 for m in cls]
        return "use " + ", ".join(names[:-1]) + " or " + names[-1] + "; an alias is echoed as its recipe's name"


#: torchao's float8 row-wise recipes by label (cost.compute.rowwise_quantize_bytes prices them)
ROWWISE_FP8_RECIPES = (Fp8Recipe.ROWWISE.label, Fp8Recipe.ROWWISE_GW_HP.label)
#: Accelerator families with torch._scaled_mm's row-wise FP8 kernel: CUTLASS on sm_90 / sm_100 (RowwiseScaledMM.cu,
#: pytorch/pytorch#125204), hipBLASLt on MI300 / MI350 (pytorch/pytorch#144432: "rowwise f8 gemm is an mi300 feature")
ROWWISE_FP8_FAMILIES = ("hopper", "blackwell", "cdna3", "cdna4")
#: Transformer Engine's FP8 recipes, each on the tensor cores it runs on (specs.training.low_precision_recipe refuses
#: mxfp8 off Blackwell, blockwise off Hopper): what a refusal of a torchao row-wise recipe offers instead where the
#: accelerator is not at hand
TE_FP8_RECIPES_TEXT = "delayed, tensorwise, mxfp8 (Blackwell) or blockwise (Hopper)"


class Zero(Choice):
    """ZeRO stage (Rajbhandari et al. 2020), PyTorch FSDP (Zhao et al. 2023, full sharding) or HSDP
    (FSDP's hybrid sharding: shard inside a group of replicas, replicate across groups)."""

    NONE = 0, "0"
    OPTIMIZER = 1, "1"
    GRADIENTS = 2, "2"
    PARAMETERS = 3, "3"
    FSDP = 4, "fsdp"
    HSDP = 5, "hsdp"  # FSDP sharded inside groups of replicas, replicated across them (HYBRID_SHARD)

    @classmethod
    def noun(cls) -> str:
        return "ZeRO stage"

    @classmethod
    def parse(cls, value: Any, where: str = "") -> Zero:
        if isinstance(value, int) and not isinstance(value, (bool, Zero)):
            value = str(value)
        return super().parse(value, where)


def zero_label(zero: Any, sep: str = "-") -> str:
    """'ZeRO-2' (or 'ZeRO 2' with ``sep`` ' '), 'FSDP', 'HSDP': a sharding mode as a reader names it; plan's
    'ZeRO-fsdp' and predict's 'ZeRO fsdp' read as a ZeRO stage that does not exist."""
    z = str(zero)
    return z.upper() if z in (Zero.FSDP.label, Zero.HSDP.label) else f"ZeRO{sep}{z}"


def sharding_stage(zero: Any) -> Any:
    """What is sharded, as the ZeRO stage number 0-3 (FSDP and HSDP shard like ZeRO-3); arrays pass through."""
    return np.minimum(zero, int(Zero.PARAMETERS))


class Recompute(Choice):
    """Activation recomputation (Korthikanti et al. 2022): none, the attention core, or every layer."""

    NONE = 0, "none"
    SELECTIVE = 1, "selective"
    FULL = 2, "full"


class ScheduleKind(Choice):
    """Pipeline schedule (Narayanan et al. 2021 §2.2; Qi et al. 2024 for ZB-H1)."""

    ONE_F_ONE_B = 0, "1f1b"
    INTERLEAVED = 1, "interleaved"
    GPIPE = 2, "gpipe"
    ZERO_BUBBLE = 3, "zb"

    @classmethod
    def noun(cls) -> str:
        return "schedule"


class Algorithm(Choice):
    """Collective algorithm for the data-parallel synchronisation (auto: NCCL's own choice)."""

    AUTO = 0, "auto"
    RING = 1, "ring"
    TREE = 2, "tree"
    RHD = 3, "rhd"
    RD = 4, "rd"
    DIRECT = 5, "direct"
    HIERARCHICAL = 6, "hierarchical"

    @classmethod
    def noun(cls) -> str:
        return "collective algorithm"


class CompressionKind(Choice):
    """Gradient compression on the wire: 16-bit cast, 8-bit quantisation, top-k sparsification."""

    NONE = 0, "none"
    FP16 = 1, "fp16", "bf16"
    INT8 = 2, "int8"
    TOPK = 3, "topk"

    @classmethod
    def noun(cls) -> str:
        return "compression"


class Optimizer(Choice):
    """The optimizer, for the staleness penalty's default (the five studied by Dai et al., ICLR 2019)."""

    SGD = 0, "sgd"
    MOMENTUM = 1, "momentum", "sgd-momentum", "nesterov"
    ADAM = 2, "adam", "adamw"
    RMSPROP = 3, "rmsprop"
    ADAGRAD = 4, "adagrad"


class Assignment(Choice):
    """Work assignment: equal shares fixed up front, or pulled from a shared queue."""

    STATIC = 0, "static"
    DYNAMIC = 1, "dynamic"


class RecomputeMethod(Choice):
    """How partial full recompute picks its layers (Megatron-LM ``--recompute-method``, with
    ``--recompute-num-layers N``): ``block`` recomputes the first N layers of each pipeline chunk and keeps
    the others' activations; ``uniform`` recomputes every layer, checkpointing the input of each group of N."""

    BLOCK = 0, "block"
    UNIFORM = 1, "uniform"

    @classmethod
    def noun(cls) -> str:
        return "recompute method"


class Layout(Choice):
    """Rank order: how the ranks of a DP x TP x PP x CP job are numbered, innermost (consecutive ranks)
    first; experts have their own grid over a stage's ranks (MoE parallel folding, docs/model.md#placement).
    A dimension's group members are the product of the degrees inner to it apart (docs/model.md#layout).
    Both orders are mainstream:

    - ``tp-cp-dp-pp`` (the default): TP innermost, PP outermost. Megatron-LM's default ``order="tp-cp-ep-dp-pp"``
      (``megatron/core/parallel_state.py``, ``initialize_model_parallel``); torchtitan's device mesh
      ``["pp", "dp_replicate", "dp_shard", "cp", "tp"]``, outermost first (``torchtitan/distributed/
      parallel_dims.py``); DeepSpeed's ``PipeModelDataParallelTopology``, axes ``pipe, data, model``
      (``deepspeed/runtime/pipe/topology.py``).
    - ``tp-cp-pp-dp``: PP inside DP, DP outermost: a pipeline's stages stay in the nearest block of
      tp cp pp GPUs (one switch) while the data-parallel replicas cross the spine. Megatron-LM's
      ``--use-tp-pp-dp-mapping`` (``order="tp-cp-ep-pp-dp"``, ``megatron/training/initialize.py``). With
      a pipeline, Megatron-LM runs it only where the expert and dense data-parallel degrees agree
      (``initialize_model_parallel`` asserts it), i.e. without EP carved out of DP: a strategy with
      ep > 1 and pp > 1 in this order is infeasible.
    """

    TP_CP_DP_PP = 0, "tp-cp-dp-pp", "tp-cp-ep-dp-pp", "tp-dp-pp", "default"
    TP_CP_PP_DP = 1, "tp-cp-pp-dp", "tp-cp-ep-pp-dp", "tp-pp-dp"

    @property
    def dims(self) -> tuple[str, ...]:
        """The parallel dimensions tp, cp, dp, pp, innermost first."""
        return tuple(self.label.split("-"))


class LossImpl(Choice):
    """Which implementation runs the output head's softmax cross-entropy (its HBM passes over the logits are
    priced by :func:`scalemodel.cost.compute.loss_logit_bytes`):

    - ``megatron`` (the default): Megatron-Core's unfused ``tensor_parallel.vocab_parallel_cross_entropy``, run
      when ``--cross-entropy-loss-fusion`` is not given (its default, ``cross_entropy_loss_fusion: bool = False``
      in megatron/core/model_parallel_config.py at core_r0.8.0 and core_v0.15.0); Megatron-DeepSpeed's
      ``mpu.vocab_parallel_cross_entropy(output.float(), labels)`` makes the same passes.
    - ``megatron_fused``: ``--cross-entropy-loss-fusion`` with the native implementation
      (megatron/core/fusions/fused_cross_entropy.py, its steps compiled by ``jit_fuser``).
    - ``te``: ``--cross-entropy-loss-fusion --cross-entropy-fusion-impl te``, Transformer Engine's Triton
      ``parallel_cross_entropy`` (Megatron-Core >= 0.13; Megatron-Bridge's performance recipes).
    - ``flash_attn``: flash-attn's Triton ``CrossEntropyLoss`` (flash_attn/ops/triton/cross_entropy.py),
      llm-foundry's MPT ``loss_fn: fused_crossentropy`` default.
    - ``torch``: eager ``torch.nn.functional.cross_entropy(logits.float(), labels)`` on one device (ATen's
      log_softmax + nll_loss; torchtitan's loss_fn without tensor parallelism, whose loss_parallel is another
      implementation).
    - ``inductor``: the same ``F.cross_entropy(logits.float(), labels)`` compiled by ``torch.compile`` (torchtitan's
      ``build_cross_entropy_loss`` with ``training.compile``, pytorch/torchtitan@e7c0cae
      torchtitan/components/loss.py): Inductor fuses the cast, the row max and sum of exp into one reduction
      and the backward into one pointwise kernel over the 16-bit logits.
    """

    MEGATRON = 0, "megatron", "unfused", "vocab_parallel"
    MEGATRON_FUSED = 1, "megatron_fused", "native", "fused"
    TE = 2, "te", "transformer_engine"
    FLASH_ATTN = 3, "flash_attn", "fused_crossentropy"
    TORCH = 4, "torch", "torch_crossentropy"
    INDUCTOR = 5, "inductor", "torch_compile", "compiled"

    @classmethod
    def noun(cls) -> str:
        return "loss implementation"


class CpCommType(Choice):
    """How context parallelism exchanges the attention inputs (Megatron-Core ``--cp-comm-type``, passed to
    Transformer Engine's DotProductAttention; TE transformer_engine/pytorch/attention/dot_product_attention/
    context_parallel.py at d0067d0, docs/model.md#cp-comm):

    - ``p2p`` (the default, Megatron-Core's): AttnFuncWithCPAndKVP2P, K and V blocks passed round the cp ring,
      each step's send/recv under the previous step's attention kernel.
    - ``all_gather``: AttnFuncWithCPAndKVAllGather, K and V all-gathered over the cp group (blocking, before the
      attention), two attention calls per rank (its two load-balanced query chunks against the gathered keys up
      to the chunk's end); the backward gathers again and reduce-scatters dK, dV. The Llama 3 paper's context
      parallelism (arXiv 2407.21783 §3.3.2).
    - ``a2a``: AttnFuncWithCPAndQKVOA2A, DeepSpeed-Ulysses: all-to-alls of Q, K, V (sequence -> heads) before the
      attention and of the output after it (the backward: dO, then dQ, dK, dV); the kernel runs over the whole
      sequence with heads / cp heads. Needs the local heads (and KV heads) divisible by cp.
    - ``a2a+p2p``: hierarchical (AttnFuncWithCPAndKVP2P with cp_group = [a2a group, p2p group]; Megatron-Core
      ``--hierarchical-context-parallel-sizes A P``): the a2a exchange inside groups of A = strategy cp_a2a_size
      consecutive CP ranks (heads / A), the p2p ring across the P = cp / A groups (s / P tokens a call).
    """

    P2P = 0, "p2p", "ring"
    ALL_GATHER = 1, "all_gather", "allgather", "ag"
    A2A = 2, "a2a", "all_to_all", "alltoall", "ulysses"
    A2A_P2P = 3, "a2a+p2p", "hierarchical", "a2a_p2p"

    @classmethod
    def noun(cls) -> str:
        return "cp_comm_type"


class StateOffload(Choice):
    """Model states held in host memory and updated there by a CPU optimizer (docs/model.md#state-offload).

    - ``none`` (the default): every state on the GPU, the optimizer step on the GPU.
    - ``optimizer``: ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840 §4): the fp32 master weights, Adam's m and v
      and the gradient partition in host memory, the Adam step on the CPU (DeepSpeedCPUAdam), the 16-bit parameter
      partition copied back to the GPU after it. DeepSpeed ``zero_optimization.offload_optimizer.device: cpu``
      ("Valid for ZeRO stage 1, 2, 3", deepspeed/runtime/zero/config.py at deepspeedai/DeepSpeed@edaa7221): zero 1,
      2 or 3.
    - ``optimizer+params``: ZeRO-Infinity's CPU offload (Rajbhandari et al. 2021, arXiv 2104.07857): the parameter
      shards in host memory too, copied to the GPU before every all-gather. DeepSpeed ``offload_param`` ("Valid
      only with stage 3", same file) with ``offload_optimizer``; PyTorch FSDP ``CPUOffload(offload_params=True)``
      and FSDP2 ``CPUOffloadPolicy`` (parameters, gradients and the optimizer step on the CPU together: FSDP has no
      optimizer-only offload): zero 3, fsdp or hsdp.

    One choice, not two switches: FSDP offers only the combined mode, and DeepSpeed's parameter offload without the
    optimizer's (the fp32 states on the GPU, the 16-bit shards on the host) is not a configuration the cited papers
    evaluate; the DeepSpeed reader lists it as not modelled."""

    NONE = 0, "none"
    OPTIMIZER = 1, "optimizer", "cpu", "zero-offload", "zero_offload"
    PARAMS = 2, "optimizer+params", "params", "all", "optimizer_params", "zero-infinity"

    @classmethod
    def noun(cls) -> str:
        return "offload_states"


class FlexBackend(Choice):
    """Which backend Megatron-Core's flex token dispatcher runs (``moe_flex_dispatcher_backend``,
    Literal['deepep', 'hybridep', 'ncclep'], default "deepep": NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/transformer/transformer_config.py L898; docs/model.md#ep-hierarchical):

    - ``deepep`` (the default): deepseek-ai/DeepEP's normal kernels (``_DeepepManager``), 20 SMs unless
      ``moe_flex_dispatcher_num_sms`` says otherwise (token_dispatcher.py L1287-1292); each token copy carries its
      top-k indices and weights.
    - ``hybridep``: DeepEP's hybrid-ep branch (``_HybridEPManager``), whose own default is 24 SMs when the group
      sits in one NVLink domain and 8 across domains (DeepEP hybrid-ep @94a9f8f csrc/hybrid_ep/config.cuh
      L366-367); each token copy carries the fp32 probabilities of the destination domain's experts.

    Megatron-Core's third backend, ``ncclep`` (NCCL EP through Transformer Engine), is not one of these: its kernels
    are NCCL's, not read here (the Megatron reader names it as not used and the run is priced as ``deepep``).
    """

    DEEPEP = 0, "deepep", "deep_ep"
    HYBRIDEP = 1, "hybridep", "hybrid_ep", "hybrid-ep"

    @classmethod
    def noun(cls) -> str:
        return "flex dispatcher backend"


class LayerImpl(Choice):
    """Which implementation runs a transformer layer's memory-bound ops (norms, residual adds, dropout, activation,
    RoPE, the attention core's layout copies); their HBM bytes per token, forward and backward, are counted from each
    one's code by :func:`scalemodel.cost.compute.layer_eltwise_bytes` (docs/model.md#layer-eltwise):

    - ``megatron_te`` (the default): Megatron-Core's TransformerLayer with the Transformer Engine spec (the norm
      inside TELayerNormColumnParallelLinear, jit-fused bias-dropout-add, fused bias-SwiGLU / bias-GeLU, fused RoPE,
      TE's DotProductAttention), Megatron-LM's default fusions (NVIDIA/Megatron-LM core_r0.8.0, TE v1.8).
    - ``megatron_legacy``: Megatron-LM before Megatron-Core and Megatron-DeepSpeed (megatron/model/transformer.py:
      Apex fused LayerNorm, jit-scripted bias-dropout-add and bias-GeLU, the core's permuted context copy).
    - ``eager``: a PyTorch eager layer of torch.nn modules (ATen LayerNorm, Linear with bias, eager residual adds and
      dropout, F.scaled_dot_product_attention on the QKV output's views, the output transposed back by a copy).
    - ``llmfoundry``: llm-foundry's MPTBlock under PyTorch eager (LPLayerNorm, eager GELU, flash-attn on unpadded
      tokens whose gather/scatter copies strategy.attention_unpad prices).
    - ``torchtitan``: torchtitan's Llama TransformerBlock compiled per block by torch.compile (inductor fusions of
      RMSNorm with the residual add, RoPE with repeat_kv, SwiGLU; SDPA, whose output needs no copy).
    - ``xla``: a layer compiled by XLA (MaxText): the torchtitan fusions without the layout copies (XLA's layout
      assignment feeds the dots transposed operands), not read from an HLO dump.
    - ``nanotron``: Hugging Face nanotron's LlamaDecoderLayer under PyTorch eager (huggingface/nanotron@c2528430
      src/nanotron/models/llama.py: flash-attn's Triton RMSNorm and in-place rotary, the QKV and packed-KV layout
      copies, eager SiLU-gate, the transposed attention output; tensor_parallel/functional.py's linears with
      tp_linear_async_communication, the benchmark grid's setting).
    - ``torchtitan_eager``: torchtitan's Llama TransformerBlock without torch.compile (norm_type rmsnorm: its RMSNorm
      as ATen ops in fp32, the complex-multiply RoPE, repeat_kv's copies, eager residual adds and silu x up, autograd's
      sums of the separate projections' input gradients; torchtitan@9dec370 / 1ea476e9f models/llama/model.py).
    - ``torchtitan_eager_fused_rmsnorm``: the same with norm_type fused_rmsnorm (torchtitan's Triton RMSNorm,
      models/norms.py TritonFusedRMSNorm).
    - ``fms``: IBM foundation-model-stack's LLaMABlock under PyTorch eager (fms@f29e546d LayerNormParameterized RMS
      norm in fp32, RotaryEmbedding's 2 x 2 rotation matrices product and sum, separate query / key / value and
      w1 / wg linears, F.scaled_dot_product_attention).
    """

    MEGATRON_TE = 0, "megatron_te", "mcore", "megatron_core", "te"
    MEGATRON_LEGACY = 1, "megatron_legacy", "legacy", "megatron_deepspeed"
    EAGER = 2, "eager", "pytorch", "torch"
    LLMFOUNDRY = 3, "llmfoundry", "llm_foundry", "mpt"
    TORCHTITAN = 4, "torchtitan", "titan", "inductor", "compiled"
    XLA = 5, "xla", "maxtext", "jax"
    NANOTRON = 6, "nanotron"
    TORCHTITAN_EAGER = 7, "torchtitan_eager", "titan_eager"
    TORCHTITAN_EAGER_FUSED_RMSNORM = 8, "torchtitan_eager_fused_rmsnorm", "titan_eager_fused_rmsnorm"
    FMS = 9, "fms", "foundation_model_stack"

    @classmethod
    def noun(cls) -> str:
        return "layer implementation"


#: The layer implementations that are torchtitan's (its framework defaults: expert TP 1, sequence parallelism on at
#: tp > 1), compiled or not.
TORCHTITAN_LAYERS = (int(LayerImpl.TORCHTITAN), int(LayerImpl.TORCHTITAN_EAGER),
                     int(LayerImpl.TORCHTITAN_EAGER_FUSED_RMSNORM))


class SyncKind(str, Enum):
    """Synchronisation mode family (the parameters live in :class:`SyncMode`)."""

    BSP = "bsp"
    BACKUP = "backup"
    ASP = "asp"
    SSP = "ssp"
    LOCAL = "local"
    HIER = "hier"


# --- parameterised choices ---------------------------------------------------------------------

SCHEDULE_ALLOWED = "use 1f1b, interleaved:V (V from 2 to 999999999), gpipe or zb"
_INT = r"^[0-9]{1,9}$"


def _small_int(text: str) -> int | None:
    """A plain ASCII decimal of at most 9 digits, else None (no signs, no Unicode digits)."""
    return int(text) if re.match(_INT, text) else None


def _not_small_int(text: str) -> str:
    """Why :func:`_small_int` refused ``text``: a count too long to take, or not a plain decimal."""
    if re.fullmatch(r"[0-9]+", text):
        return "has more than 9 digits"
    return "is negative" if re.fullmatch(r"-[0-9]+", text) else "is not an integer"


class Schedule(msgspec.Struct, frozen=True):
    """A pipeline schedule and its virtual stages per GPU (1 except for interleaved)."""

    kind: ScheduleKind = ScheduleKind.ONE_F_ONE_B
    virtual_stages: int = 1

    @property
    def label(self) -> str:
        return f"interleaved:{self.virtual_stages}" if self.kind == ScheduleKind.INTERLEAVED else self.kind.label


def parse_schedule(value: Any, where: str = "") -> Schedule:
    """``1f1b | interleaved:V | gpipe | zb`` (V >= 2)."""
    if isinstance(value, Schedule):
        return value
    text = str(value).strip().lower() if isinstance(value, str) else ""
    name, sep, arg = text.partition(":")
    kinds = {k.label: k for k in ScheduleKind}
    if name in kinds and not sep and name != "interleaved":
        return Schedule(kinds[name])
    if name == "interleaved":
        v = _small_int(arg) if sep else None
        if sep and arg and v is None:
            raise InputError(f"virtual stages {arg!r} in schedule {value!r} {_not_small_int(arg)}", where=where,
                             allowed=SCHEDULE_ALLOWED)
        if v is None or v < 2:
            raise InputError(f"schedule {value!r} needs V >= 2 virtual stages, e.g. interleaved:2", where=where,
                             allowed=SCHEDULE_ALLOWED)
        return Schedule(ScheduleKind.INTERLEAVED, v)
    raise InputError(f"unknown schedule {written(value)}", where=where, allowed=SCHEDULE_ALLOWED)


COMPRESSION_ALLOWED = "use none, fp16, bf16, int8 or topk:FRACTION with 0 < FRACTION <= 1 (e.g. topk:0.01)"


class Compression(msgspec.Struct, frozen=True):
    """Gradient compression and, for top-k, the kept fraction of the elements."""

    kind: CompressionKind = CompressionKind.NONE
    topk_ratio: float = 1.0

    @property
    def label(self) -> str:
        return f"topk:{self.topk_ratio:g}" if self.kind == CompressionKind.TOPK else self.kind.label


def parse_compression(value: Any, where: str = "") -> Compression:
    """``none | fp16 | bf16 | int8 | topk:FRACTION`` (0 < FRACTION <= 1)."""
    if isinstance(value, Compression):
        return value
    text = value.strip().lower() if isinstance(value, str) else ""
    name, sep, arg = text.partition(":")
    if name == "topk" and sep:
        try:
            ratio = float(arg) if re.fullmatch(r"[0-9.eE+-]{1,32}", arg) else math.nan
        except ValueError:
            ratio = math.nan
        if not (0.0 < ratio <= 1.0):
            raise InputError(f"top-k fraction in {value!r} must be in (0, 1]", where=where,
                             allowed=COMPRESSION_ALLOWED)
        return Compression(CompressionKind.TOPK, ratio)
    if not sep and name != "topk":
        for k in CompressionKind:
            if name == k.label or name in k.aliases:
                return Compression(k)
    raise InputError(f"unknown compression {written(value)}", where=where, allowed=COMPRESSION_ALLOWED)


SEQUENCE_LENGTHS_ALLOWED = "use fixed (every sample seq_len tokens, e.g. packed) or uniform:LO:HI (1 <= LO <= HI)"


class SequenceLengths(msgspec.Struct, frozen=True):
    """Distribution of one training sample's length in tokens: ``fixed`` (low = high = 0: every sample
    is seq_len tokens, as with packed sequences) or discrete uniform on [low, high]."""

    low: int = 0
    high: int = 0

    @property
    def fixed(self) -> bool:
        return self.high == 0

    @property
    def label(self) -> str:
        return "fixed" if self.fixed else f"uniform:{self.low}:{self.high}"


def parse_sequence_lengths(value: Any, where: str = "") -> SequenceLengths:
    """``fixed | packed | uniform:LO:HI`` (1 <= LO <= HI, plain decimals)."""
    if isinstance(value, SequenceLengths):
        return value
    text = value.strip().lower() if isinstance(value, str) else ""
    if text in ("fixed", "packed"):
        return SequenceLengths()
    name, _, rest = text.partition(":")
    lo_text, _, hi_text = rest.partition(":")
    lo, hi = _small_int(lo_text), _small_int(hi_text)
    if name == "uniform" and lo is not None and hi is not None and 1 <= lo <= hi:
        return SequenceLengths(lo, hi)
    # why, where the distribution is known: 'uniform:10:1' and 'uniform:1:1000000000' were "unknown distribution"
    why = ("" if name != "uniform" or not lo_text or not hi_text else
           f": LO {lo_text[:20]} {_not_small_int(lo_text)}" if lo is None else
           f": HI {hi_text[:20]} {_not_small_int(hi_text)}" if hi is None else
           f": LO {lo} is above HI {hi}" if lo > hi else ": LO is 0")
    raise InputError(f"{'cannot read' if why else 'unknown'} sequence-length distribution {value!r}{why}", where=where,
                     allowed=SEQUENCE_LENGTHS_ALLOWED)


DP_COMM_ALLOWED = "use allreduce or ps:K[:colocated|:dedicated] (K from 1 to 999999999 servers)"


class DpComm(msgspec.Struct, frozen=True):
    """How data-parallel gradients are exchanged: all-reduce (servers = 0) or K parameter servers,
    dedicated machines with their own NICs (``ps:K``, ``ps:K:dedicated``) or colocated on the GPU
    machines (``ps:K:colocated``); docs/model.md#parameter-server."""

    servers: int = 0
    colocated: bool = False

    @property
    def label(self) -> str:
        if not self.servers:
            return "allreduce"
        return f"ps:{self.servers}" + (":colocated" if self.colocated else "")


def parse_dp_comm(value: Any, where: str = "") -> DpComm:
    """``allreduce | ps:K | ps:K:colocated | ps:K:dedicated``."""
    if isinstance(value, DpComm):
        return value
    parts = value.strip().lower().split(":") if isinstance(value, str) else [""]
    if parts == ["allreduce"]:
        return DpComm()
    if parts[0] == "ps" and len(parts) in (2, 3):
        k = _small_int(parts[1])
        if k is None and parts[1]:
            raise InputError(f"server count {parts[1]!r} in {value!r} {_not_small_int(parts[1])}", where=where,
                             allowed=DP_COMM_ALLOWED)
        place = parts[2] if len(parts) == 3 else "dedicated"
        if k is not None and k >= 1 and place in ("colocated", "dedicated"):
            return DpComm(k, place == "colocated")
    raise InputError(f"unknown DP communication {written(value)}", where=where, allowed=DP_COMM_ALLOWED)


SYNC_ALLOWED = ("bsp | backup:B | asp | ssp:S | local:H | hier:G | hier:G:H (B, S >= 0; H, G >= 1; integers of at "
                "most 9 digits)")


class SyncMode(msgspec.Struct, frozen=True):
    """A parsed synchronisation strategy. ``param`` is B, S, H or G; ``period`` is H of hier:G:H."""

    kind: str
    param: int = 0
    period: int = 0

    def label(self) -> str:
        if self.kind in (SyncKind.BSP, SyncKind.ASP):
            return str(SyncKind(self.kind).value)
        if self.kind == SyncKind.HIER and self.period:
            return f"hier:{self.param}:{self.period}"
        return f"{SyncKind(self.kind).value}:{self.param}"


def parse_sync(text: Any, where: str = "--sync") -> SyncMode:
    """Parse ``bsp|backup:B|asp|ssp:S|local:H|hier:G[:H]``; raise InputError on anything else."""
    if isinstance(text, SyncMode):
        return text
    if not isinstance(text, str):  # the API's sync_modes=['bsp', 5] said "empty sync strategy 5"
        raise InputError(f"{str(text)[:60]} is not a sync strategy name", where=where, allowed=SYNC_ALLOWED)
    if not text.strip():
        raise InputError(f"empty sync strategy {text!r}", where=where, allowed=SYNC_ALLOWED)
    parts = text.strip().lower().split(":")
    name, args = parts[0], parts[1:]
    kinds = {k.value: k for k in SyncKind}
    if name not in kinds:
        raise InputError(f"unknown sync strategy {text!r}", where=where, allowed=SYNC_ALLOWED)
    kind = kinds[name]
    want = {SyncKind.BSP: (0,), SyncKind.ASP: (0,), SyncKind.HIER: (1, 2)}.get(kind, (1,))
    if len(args) not in want:
        raise InputError(f"wrong number of parameters in {text!r}", where=where, allowed=SYNC_ALLOWED)
    vals = []
    for a in args:
        v = _small_int(a)
        if v is None:
            raise InputError(f"parameter {a!r} in {text!r} {_not_small_int(a)}", where=where, allowed=SYNC_ALLOWED)
        vals.append(v)
    minimum = 1 if kind in (SyncKind.LOCAL, SyncKind.HIER) else 0
    if vals and vals[0] < minimum:
        raise InputError(f"parameter of {name} must be >= {minimum}, got {vals[0]}", where=where,
                         allowed=SYNC_ALLOWED)
    if len(vals) == 2 and vals[1] < 1:
        raise InputError(f"averaging period of hier must be >= 1, got {vals[1]}", where=where, allowed=SYNC_ALLOWED)
    return SyncMode(kind, vals[0] if vals else 0, vals[1] if len(vals) == 2 else 0)


#: Per Choice class, its codes as (lowest, highest, whether they are every integer between): the cost functions
#: convert codes hundreds of times per plan, so the members are listed once.
_CODE_RANGE: dict[type[Choice], tuple[int, int, bool]] = {}


def _valid_codes(cls: type[Choice], arr: np.ndarray) -> bool:
    """Whether every element of the integer array ``arr`` is a code of ``cls``: a range test (min, max) where the
    codes are consecutive integers, membership (np.isin) otherwise."""
    if cls not in _CODE_RANGE:
        valid = sorted(int(m) for m in cls)
        _CODE_RANGE[cls] = (valid[0], valid[-1], valid == list(range(valid[0], valid[-1] + 1)))
    lo, hi, dense = _CODE_RANGE[cls]
    if not arr.size:
        return True
    if dense:
        return bool(lo <= int(arr.min()) and int(arr.max()) <= hi)
    return bool(np.all(np.isin(arr, [int(m) for m in cls])))


def codes(cls: type[Choice], value: Any, where: str = "") -> np.ndarray:
    """Labels or integer codes of ``cls`` (a scalar or an array) as an int array; anything else is an error.

    Cost functions accept either spelling so they stay usable on plain numbers and numpy arrays.
    """
    where = where or cls.noun()
    if isinstance(value, str):
        return np.asarray(int(cls.parse(value, where)))
    arr = np.asarray(value)
    if arr.dtype.kind in "OUS":
        return np.vectorize(lambda v: int(cls.parse(v, where)), otypes=[np.int64])(arr)
    if arr.dtype.kind not in "iub" or not _valid_codes(cls, arr):
        listed = ", ".join(f"{int(m)} ({m.label})" for m in cls)
        raise InputError(f"{cls.noun()} codes must be one of {listed}", where=where, allowed=cls.allowed())
    return arr.astype(np.int64)


# ------------------------------------------------------------------------------------------------
# Network tier transports (docs/model.md#transport; priced in scalemodel.cost.transport)
# ------------------------------------------------------------------------------------------------

#: The transports a network tier may name: kernel TCP/IP over Ethernet, RoCE v2, InfiniBand.
TRANSPORTS: tuple[str, ...] = ("tcp", "roce", "ib")
#: Transports that move data by RDMA verbs (kernel bypass, zero copy, registered memory).
RDMA_TRANSPORTS: frozenset[str] = frozenset({"roce", "ib"})
#: InfiniBand path MTUs, payload bytes per packet (InfiniBand Architecture Specification vol. 1, section 7.7).
IB_MTUS: tuple[int, ...] = (256, 512, 1024, 2048, 4096)
#: An Ethernet MTU from 576 B (RFC 791: the datagram every host must accept) to 9216 B (the largest jumbo
#: frame common switches take).
ETH_MTU_RANGE: tuple[int, int] = (576, 9216)
#: Default link MTU: Ethernet's standard 1500 B (IEEE 802.3 maximum MAC client data) for tcp and roce, 4096 B
#: (the largest IB MTU) for ib.
DEFAULT_MTU: dict[str, int] = {"tcp": 1500, "roce": 1500, "ib": 4096}


def check_transport(transport: str, where: str = "transport") -> str:
    """``transport`` if it is one of :data:`TRANSPORTS`, else an error listing them."""
    if transport not in TRANSPORTS:
        raise InputError(f"unknown transport {written(transport)}", where=where, allowed=", ".join(TRANSPORTS))
    return transport


def check_mtu(transport: str, mtu: float, where: str = "mtu") -> float:
    """``mtu`` if valid for ``transport``: an IB MTU (256, 512, 1024, 2048, 4096) for ib, an Ethernet MTU
    from 576 to 9216 B for tcp and roce."""
    check_transport(transport)
    if transport == "ib":
        if mtu not in IB_MTUS:
            raise InputError(f"InfiniBand MTU {mtu:g} B is not an IB MTU", where=where,
                             allowed=", ".join(str(m) for m in IB_MTUS) + " bytes")
    elif not (ETH_MTU_RANGE[0] <= mtu <= ETH_MTU_RANGE[1]):
        raise InputError(f"Ethernet MTU {mtu:g} B is out of range", where=where,
                         allowed=f"{ETH_MTU_RANGE[0]} to {ETH_MTU_RANGE[1]} bytes")
    return float(mtu)
