"""Workload specs: a transformer described by its shape, or a generic model by its totals."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from scalemodel.specs.base import Sourced, Spec
from scalemodel.specs.quantities import Bytes, Count, Flops, Seconds


class MoESpec(Spec):
    experts: int = Field(gt=0, description="routed experts per MoE layer")
    top_k: int = Field(gt=0, description="experts each token is routed to")
    ffn_hidden: int | None = Field(default=None, gt=0, description="expert FFN width (default: ffn_hidden)")
    shared_experts: int = Field(default=0, ge=0)
    every: int = Field(default=1, gt=0, description="one MoE layer every N layers")
    first_dense: int = Field(default=0, ge=0, description="leading layers that stay dense")

    @model_validator(mode="after")
    def _k_le_experts(self) -> MoESpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k {self.top_k} exceeds experts {self.experts}")
        return self


class MLASpec(Spec):
    """Multi-head latent attention (DeepSeek-AI 2024, arXiv:2405.04434 §2.1), HuggingFace key names."""

    kv_lora_rank: int = Field(gt=0, description="latent KV width r_kv")
    q_lora_rank: int = Field(default=0, ge=0, description="low-rank query width r_q (0 = full-rank Q)")
    qk_nope_head_dim: int = Field(gt=0, description="per-head Q/K width without rotary embedding")
    qk_rope_head_dim: int = Field(gt=0, description="decoupled rotary key width shared by the heads")
    v_head_dim: int = Field(gt=0, description="per-head value width")


class TransformerWorkload(Sourced):
    kind: Literal["transformer"] = "transformer"
    name: str
    description: str = ""
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int | None = Field(default=None, gt=0, description="key/value heads (GQA); default = heads")
    head_dim: int | None = Field(default=None, gt=0, description="default hidden / heads")
    ffn_hidden: int | None = Field(default=None, gt=0, description="default 4 * hidden")
    vocab: int = Field(gt=0)
    seq_len: int = Field(gt=0)
    gated_mlp: bool = False
    tied_embeddings: bool = False
    biases: bool | None = Field(default=None, description=(
        "linear biases and LayerNorm (GPT/BERT style); default: true unless gated_mlp"))
    position_embeddings: int = Field(default=0, ge=0, description=(
        "learned absolute positions (GPT-2, OPT, BLOOM has none); 0 for rotary/ALiBi"))
    parallel_block: bool = Field(default=False, description=(
        "attention and MLP read the same input and are summed (GPT-J, GPT-NeoX, PaLM, Falcon)"))
    norms_per_layer: int = Field(default=2, ge=1, le=2, description=(
        "pre-norms per layer: 2, or 1 when a parallel block shares one (GPT-J, Falcon-7B)"))
    sliding_window: int | None = Field(default=None, gt=0, description=(
        "keys a query attends in local layers (Mistral 7B v0.1, Gemma 2/3); none = global attention"))
    sliding_window_pattern: int = Field(default=0, ge=0, description=(
        "every k-th layer is global, the others local (Gemma 2: 2, Gemma 3: 6); 0 = all layers local"))
    mla: MLASpec | None = Field(default=None, description="multi-head latent attention (DeepSeek-V2/V3)")
    moe: MoESpec | None = None
    params: Count | None = Field(default=None, description="published parameter count, for checking")

    @model_validator(mode="after")
    def _heads(self) -> TransformerWorkload:
        kv = self.kv_heads or self.heads
        if self.heads % kv:
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {kv}")
        if self.sliding_window_pattern and not self.sliding_window:
            raise ValueError("sliding_window_pattern needs sliding_window")
        if self.moe and self.moe.first_dense >= self.layers:
            raise ValueError(f"moe.first_dense {self.moe.first_dense} leaves no MoE layer of {self.layers}")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}, and no head_dim "
                             "is given (head_dim defaults to hidden / heads)")
        if self.moe is not None and self.moe.every > self.layers:
            raise ValueError(f"moe.every {self.moe.every} exceeds layers {self.layers}")
        return self

    @property
    def ffn(self) -> int:
        return self.ffn_hidden or 4 * self.hidden

    @property
    def kv(self) -> int:
        return self.kv_heads or self.heads


class GenericWorkload(Sourced):
    kind: Literal["generic"] = "generic"
    name: str
    description: str = ""
    params: Count
    flops_per_sample: Flops = Field(description="FORWARD FLOPs per sample (training = fwd + bwd)")
    backward_factor: float = Field(default=2.0, gt=0, description="backward FLOPs / forward FLOPs")
    activation_bytes_per_sample: Bytes | None = None
    input_bytes_per_sample: Bytes | None = None
    time_per_sample: Seconds | None = Field(
        default=None, description="measured single-GPU training time per sample (fwd+bwd); overrides the roofline")


def _workload_kind(v: Any) -> str:
    if isinstance(v, dict):
        kind = v.get("kind")
        if kind in ("transformer", "generic"):
            return str(kind)
        if kind is not None:
            return str(kind)
        return "transformer" if "layers" in v else "generic"
    return str(getattr(v, "kind", "transformer"))


Workload = Annotated[
    Annotated[TransformerWorkload, Tag("transformer")] | Annotated[GenericWorkload, Tag("generic")],
    Discriminator(_workload_kind),
]
