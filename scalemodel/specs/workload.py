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


#: Upper bounds for the integer fields of a HuggingFace config (far above any published model).
_HF_MAX = {"layers": 10_000, "hidden": 10**6, "heads": 10**5, "kv_heads": 10**5, "head_dim": 10**5,
           "ffn_hidden": 10**7, "vocab": 10**8, "seq_len": 10**9, "experts": 10**5, "top_k": 10**5,
           "moe_ffn": 10**7, "shared_experts": 10**5, "every": 10_000, "first_dense": 10_000}


def from_hf_config(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """Map a HuggingFace ``config.json`` onto the transformer workload fields (unknown keys ignored).

    Each value used is checked here so the error names the config's own key: integers (not booleans,
    not strings), positive, within :data:`_HF_MAX`; heads dividing hidden (without ``head_dim``), at
    most as many heads as hidden units, key/value heads dividing heads, and MoE layer settings within
    the layer count. ``max_position_embeddings`` (or its aliases) defaults to 2048 only when absent.
    """
    from scalemodel.errors import InputError

    used: dict[str, str] = {}

    def first(field: str, *keys: str, required: bool = False, minimum: int = 1) -> Any:
        for k in keys:
            if k in cfg and cfg[k] is not None:
                v = cfg[k]
                if isinstance(v, bool) or not isinstance(v, int):
                    raise InputError(f"expected an integer, got {str(v)[:40]!r}", where=k,
                                     allowed=f"a positive integer ({field})")
                if not minimum <= v <= _HF_MAX[field]:
                    raise InputError(f"{v} is out of range", where=k,
                                     allowed=f"an integer from {minimum} to {_HF_MAX[field]} ({field})")
                used[field] = k
                return v
        if required:
            raise InputError("missing", where=" or ".join(keys), allowed=f"the model's {field}")
        return None

    act = str(cfg.get("hidden_act") or cfg.get("activation_function") or "").lower()
    model_type = str(cfg.get("model_type", "")).lower()
    gated = act in ("silu", "swiglu", "geglu", "swish") or model_type in ("llama", "mistral", "mixtral",
                                                                           "qwen2", "deepseek_v3", "gemma")
    layers = first("layers", "num_hidden_layers", "n_layer", "num_layers", required=True)
    hidden = first("hidden", "hidden_size", "n_embd", "d_model", required=True)
    heads = first("heads", "num_attention_heads", "n_head", required=True)
    kv_heads = first("kv_heads", "num_key_value_heads")
    head_dim = first("head_dim", "head_dim")
    seq_len = first("seq_len", "max_position_embeddings", "n_positions", "seq_length")
    tie = cfg.get("tie_word_embeddings", model_type in ("gpt2", "bert"))
    if not isinstance(tie, bool):
        raise InputError(f"expected true or false, got {str(tie)[:40]!r}", where="tie_word_embeddings")
    out: dict[str, Any] = {
        "kind": "transformer",
        "name": name,
        "description": f"from HuggingFace config ({model_type[:60] or 'unknown type'})",
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "ffn_hidden": first("ffn_hidden", "intermediate_size", "n_inner", "ffn_dim"),
        "vocab": first("vocab", "vocab_size", required=True),
        "seq_len": 2048 if seq_len is None else seq_len,
        "gated_mlp": gated,
        "tied_embeddings": tie,
    }
    if heads > hidden:
        raise InputError(f"{heads} attention heads for {hidden} hidden units", where=used["heads"],
                         allowed=f"at most {used['hidden']} heads")
    if head_dim is None and hidden % heads:
        raise InputError(f"{used['hidden']} {hidden} is not a multiple of {used['heads']} {heads}", where=used["heads"],
                         allowed="a divisor of the hidden size (or give head_dim)")
    if kv_heads is not None and heads % kv_heads:
        raise InputError(f"{used['heads']} {heads} is not a multiple of {kv_heads}", where=used["kv_heads"],
                         allowed="a divisor of the number of attention heads")
    experts = first("experts", "num_local_experts", "n_routed_experts", "num_experts", minimum=0)
    if experts:
        top_k = first("top_k", "num_experts_per_tok", "top_k") or 2
        if top_k > experts:
            raise InputError(f"{top_k} experts per token of {experts}", where=used.get("top_k", "top_k"),
                             allowed=f"at most {used['experts']} ({experts})")
        first_dense = first("first_dense", "first_k_dense_replace", minimum=0) or 0
        if first_dense >= layers:
            raise InputError(f"{first_dense} leading dense layers of {layers}", where=used["first_dense"],
                             allowed=f"fewer than {used['layers']} ({layers})")
        every = first("every", "moe_layer_freq") or 1
        if every > layers:
            raise InputError(f"one MoE layer every {every} of {layers} layers", where=used["every"],
                             allowed=f"at most {used['layers']} ({layers})")
        out["moe"] = {
            "experts": experts,
            "top_k": top_k,
            "ffn_hidden": first("moe_ffn", "moe_intermediate_size"),
            "shared_experts": first("shared_experts", "n_shared_experts", minimum=0) or 0,
            "every": every,
            "first_dense": first_dense,
        }
    return {k: v for k, v in out.items() if v is not None}
