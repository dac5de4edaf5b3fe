"""Workload specs: a transformer described by its shape, or a generic model by its totals."""


from typing import Annotated, Any, Literal

from msgspec import Meta

from scalemodel.specs.base import Discriminator, Sourced, Spec, field_error
from scalemodel.specs.quantities import Bytes, Count, Flops, Seconds


class MoESpec(Spec, kw_only=True):
    experts: Annotated[int, Meta(gt=0, description="routed experts per MoE layer")]
    top_k: Annotated[int, Meta(gt=0, description="experts each token is routed to")]
    ffn_hidden: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(
        description="expert FFN width (default: ffn_hidden)")] = None
    shared_experts: Annotated[int, Meta(ge=0)] = 0
    every: Annotated[int, Meta(gt=0, description="one MoE layer every N layers")] = 1
    first_dense: Annotated[int, Meta(ge=0, description="leading layers that stay dense")] = 0
    latent_size: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(description=(
        "LatentMoE width l (HF/Megatron-Core moe_latent_size; Nemotron 3 Super): the routed experts read and write "
        "l-wide tokens, a replicated h -> l projection before dispatch and l -> h after combine; the router and the "
        "shared experts stay at the hidden width; none = off (docs/model.md#latent-moe)"))] = None

    def _check(self) -> None:
        if self.top_k > self.experts:
            raise ValueError(f"top_k {self.top_k} exceeds experts {self.experts}; top_k from 1 to experts")


class MLASpec(Spec, kw_only=True):
    """Multi-head latent attention (DeepSeek-AI 2024, arXiv:2405.04434 §2.1), HuggingFace key names."""

    kv_lora_rank: Annotated[int, Meta(gt=0, description="latent KV width r_kv")]
    q_lora_rank: Annotated[int, Meta(ge=0, description="low-rank query width r_q (0 = full-rank Q)")] = 0
    qk_nope_head_dim: Annotated[int, Meta(gt=0, description="per-head Q/K width without rotary embedding")]
    qk_rope_head_dim: Annotated[int, Meta(gt=0, description="decoupled rotary key width shared by the heads")]
    v_head_dim: Annotated[int, Meta(gt=0, description="per-head value width")]


class MambaSpec(Spec, kw_only=True):
    """Mamba-2 mixer widths (Megatron-Core TransformerConfig ``mamba_*``; defaults are Megatron-Core's)."""

    state_dim: Annotated[int, Meta(gt=0, description="SSM state width N (mamba_state_dim, d_state)")] = 128
    groups: Annotated[int, Meta(gt=0, description="groups G sharing B and C (mamba_num_groups)")] = 8
    head_dim: Annotated[int, Meta(gt=0, description="head width P (mamba_head_dim)")] = 64
    heads: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(description=(
        "heads H (mamba_num_heads); default expand x hidden / head_dim"))] = None
    expand: Annotated[int, Meta(gt=0, description="d_inner / hidden when heads is not given (Megatron: 2)")] = 2
    conv_kernel: Annotated[int, Meta(gt=0, description="causal conv1d width (d_conv)")] = 4
    chunk_size: Annotated[int, Meta(gt=0, description="SSD chunk length Q of the chunked scan")] = 128


class HybridSpec(Spec, kw_only=True):
    """A hybrid Mamba-2 / attention / MLP / MoE layer pattern (Megatron-Core hybrid model; Nemotron-H,
    Nemotron 3). docs/model.md#mamba-2-layers."""

    pattern: Annotated[str, Meta(min_length=1, max_length=100000, description=(
        "Megatron hybrid_layer_pattern (hybrid_override_pattern): one character per layer, M Mamba-2, * "
        "self-attention, - MLP, E MoE; | marks a pipeline-stage boundary and is not a layer"))]
    mamba: Annotated[MambaSpec | None, Meta(description=(
        "Mamba-2 widths (default: Megatron-Core's: state_dim 128, groups 8, head_dim 64, expand 2)"))] = None
    mtp_pattern: Annotated[Literal["*E", "*-"] | None, Meta(description=(
        "layer pattern of each multi-token prediction module's block (HF mtp_hybrid_override_pattern; Nemotron 3 "
        "Super: *E): an attention layer and an MoE (E) or MLP (-) layer, priced as one attention + MLP layer; "
        "required with mtp_layers"))] = None

    def _check(self) -> None:
        bad = sorted({c for c in self.pattern if c not in "M*-E|"})
        if bad:
            raise field_error("pattern", f"unknown layer character(s) {''.join(bad)[:40]!r}",
                              "M (Mamba-2), * (attention), - (MLP), E (MoE), | (pipeline-stage boundary)")
        if not self.pattern.replace("|", ""):
            raise field_error("pattern", "no layer", "at least one of M * - E")

    @property
    def layers(self) -> int:
        return len(self.pattern.replace("|", ""))


class TransformerWorkload(Sourced, kw_only=True, tag_field="kind", tag="transformer"):
    name: str
    description: str = ""
    layers: Annotated[int, Meta(gt=0)]
    hidden: Annotated[int, Meta(gt=0)]
    heads: Annotated[int, Meta(gt=0)]
    kv_heads: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(
        description="key/value heads (GQA); default = heads")] = None
    head_dim: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(description="default hidden / heads")] = None
    ffn_hidden: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(description="default 4 * hidden")] = None
    vocab: Annotated[int, Meta(gt=0)]
    seq_len: Annotated[int, Meta(gt=0)]
    gated_mlp: bool = False
    tied_embeddings: bool = False
    biases: Annotated[bool | None, Meta(description=(
        "linear biases (Megatron-Core add_bias_linear; GPT/BERT style); default: true unless gated_mlp"))] = None
    norm_biases: Annotated[bool | None, Meta(description=(
        "each norm has a bias beside its gain (LayerNorm's beta, GPT/BERT): 2 x hidden per norm instead of hidden; "
        "false for RMSNorm (Llama; GPT-OSS, whose linears have biases); default: biases and not gated_mlp (the gated "
        "SwiGLU families norm with RMSNorm); set it true for LayerNorm models without linear biases (Falcon)"))] = None
    position_embeddings: Annotated[int, Meta(ge=0, description=(
        "rows of a learned absolute position table (GPT-2/3, OPT, BERT, Megatron GPT, MPT's MosaicGPT defaults); "
        "0 for rotary / ALiBi / none"))] = 0
    rotary: Annotated[bool | None, Meta(description=(
        "rotary position embeddings (RoPE) on queries and keys, on the whole head or a part of it (GPT-J "
        "rotary_dim, GPT-NeoX rotary_pct, Nemotron-4 rotary_percent: the fused kernel reads and writes whole heads "
        "either way); false: no pass over Q and K, for ALiBi (BLOOM; its bias is built inside the fused attention "
        "kernel) or no position encoding (the attention layers of Nemotron-H / Nemotron 3); default: true unless "
        "position_embeddings"))] = None
    parallel_block: Annotated[bool, Meta(description=(
        "attention and MLP read the same input and are summed (GPT-J, GPT-NeoX, PaLM, Falcon)"))] = False
    norms_per_layer: Annotated[int, Meta(ge=1, le=2, description=(
        "pre-norms per layer: 2, or 1 when a parallel block shares one (GPT-J, Falcon-7B)"))] = 2
    sliding_window: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(description=(
        "keys a query attends in local layers (Mistral 7B v0.1, Gemma 2/3); none = global attention"))] = None
    sliding_window_pattern: Annotated[int, Meta(ge=0, description=(
        "every k-th layer is global, the others local (Gemma 2: 2, Gemma 3: 6); 0 = all layers local"))] = 0
    mla: Annotated[MLASpec | None, Meta(description="multi-head latent attention (DeepSeek-V2/V3)")] = None
    dropout: Annotated[bool, Meta(description=(
        "hidden/attention dropout on in training (Megatron-LM's default 0.1, GPT-3): each layer stores two "
        "dropout masks; false for models trained with dropout 0 (Llama 3, Qwen3, DeepSeek-V3), whose masks "
        "PyTorch does not allocate"))] = True
    causal: Annotated[bool, Meta(description=(
        "causal (decoder) self-attention: a fused attention kernel computes only the unmasked score blocks, "
        "about half (FlashAttention-2 §3.1.1); false for bidirectional encoders (BERT)"))] = True
    squared_relu: Annotated[bool, Meta(description=(
        "the (ungated) MLP's activation is squared ReLU, relu(x)^2 (Nemotron-4; HF hidden_act relu2): Megatron-LM "
        "and NeMo run it as two eager ATen ops, relu then pow, with no fused kernel; false = GeLU (or SwiGLU when "
        "gated)"))] = False
    moe: MoESpec | None = None
    mtp_layers: Annotated[int, Meta(ge=0, le=1000, description=(
        "multi-token prediction modules D (DeepSeek-V3 report arXiv:2412.19437 section 2.2; HF "
        "num_nextn_predict_layers, Megatron-Core --mtp-num-layers): each adds RMSNorms of the hidden state and "
        "of the shared embedding, a 2h -> h projection, one transformer block of the last layer's kind and a "
        "pass through the shared output head, all on the last pipeline stage; 0 = none"))] = 0
    hybrid: Annotated[HybridSpec | None, Meta(description=(
        "hybrid layer pattern: each layer one block (Mamba-2, attention, MLP or MoE) with one pre-norm; layers must "
        "equal the pattern's layers, moe (experts, top_k, ffn_hidden, shared_experts) gives the E layers' widths"))] \
        = None
    mtp_shared: Annotated[bool, Meta(description=(
        "the mtp_layers modules are one module run mtp_layers times on its own weights (Megatron-Core "
        "mtp_use_repeated_layer; the Nemotron 3 Super recipes: mtp_num_layers 2 over the checkpoint's one module): "
        "parameters, gradients and optimizer states of one module, compute and activations of mtp_layers"))] = False
    params: Annotated[Count | None, Meta(description="published parameter count, for checking")] = None

    @property
    def kind(self) -> Literal["transformer"]:
        return "transformer"

    def _check(self) -> None:
        kv = self.kv_heads or self.heads
        if self.heads % kv:
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {kv}; kv_heads that divide heads")
        if self.mla is not None:
            self._check_mla(self.mla)
        if self.rotary and self.position_embeddings:
            raise field_error("rotary", f"true with {self.position_embeddings} learned positions: a model adds a "
                              "learned position table or rotates Q and K, not both", "leave rotary out (or false) with "
                              "position_embeddings, or position_embeddings 0", also="position_embeddings")
        if self.position_embeddings and self.seq_len > self.position_embeddings:  # specs.training.learned_positions_fit
            raise field_error("seq_len", f"{self.seq_len} is longer than the learned position table of "
                              f"{self.position_embeddings} rows (position_embeddings): no position past it has an "
                              "embedding", f"seq_len at most {self.position_embeddings}, or position_embeddings of at "
                              f"least {self.seq_len}", also="position_embeddings")
        if self.squared_relu and self.gated_mlp:
            raise field_error("squared_relu", "true with gated_mlp true: squared ReLU is the activation of an "
                              "ungated MLP", "gated_mlp false, or squared_relu false (a gated MLP's activation is "
                              "SwiGLU / GeGLU)")
        if self.sliding_window_pattern and not self.sliding_window:
            raise ValueError("sliding_window_pattern needs sliding_window; give sliding_window too, or "
                             "sliding_window_pattern: 0")
        if self.moe and self.moe.first_dense >= self.layers:
            raise ValueError(f"moe.first_dense {self.moe.first_dense} leaves no MoE layer of {self.layers}; "
                             "first_dense below layers")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}, and no head_dim "
                             "is given (head_dim defaults to hidden / heads); heads that divide hidden, or a head_dim")
        if self.moe is not None and self.moe.latent_size is not None and self.moe.latent_size >= self.hidden:
            raise field_error("moe.latent_size", f"{self.moe.latent_size} is not below hidden {self.hidden}",
                              "a latent width from 1 to hidden - 1, or leave it out (no latent projection)",
                              also="hidden")  # fuzz27: --set model.hidden was refused at the file's latent_size line
        if self.moe is not None and self.moe.every > self.layers:
            raise ValueError(f"moe.every {self.moe.every} exceeds layers {self.layers}; every from 1 to layers")
        if self.hybrid is not None:
            self._check_hybrid(self.hybrid)

    def _check_mla(self, mla: MLASpec) -> None:
        # round 21: both were read and dropped without a word under mla (engine.job.transformer_shape prices the
        # MLA widths): kv_heads 8 of 128 heads priced every head's keys and values, head_dim 64 priced 192
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if self.kv_heads is not None and self.kv_heads != self.heads:
            raise field_error("kv_heads", f"{self.kv_heads} with mla: multi-head latent attention up-projects keys and "
                              f"values for each of the {self.heads} heads from one latent (no KV groups)",
                              f"leave kv_heads out with mla (or {self.heads}, the heads)")
        if self.head_dim is not None and self.head_dim != qk:
            raise field_error("head_dim", f"{self.head_dim} with mla, whose query/key head width is "
                              f"mla.qk_nope_head_dim + mla.qk_rope_head_dim = {qk} (values: mla.v_head_dim)",
                              f"leave head_dim out with mla (or {qk}); the MLA widths are set under mla")
        if self.position_embeddings:
            # fuzz23: learned positions with mla priced a learned position table and no RoPE (eager_rope was "not
            # priced: it needs rotary position embeddings"), while mla.qk_rope_head_dim is the rotary key's width
            raise field_error("position_embeddings", f"{self.position_embeddings} learned positions with mla, whose "
                              f"keys carry rotary embeddings (mla.qk_rope_head_dim = {mla.qk_rope_head_dim})",
                              "leave position_embeddings out (0) with mla", also="mla")
        if self.rotary is False:
            raise field_error("rotary", f"false with mla, whose keys carry rotary embeddings (mla.qk_rope_head_dim = "
                              f"{mla.qk_rope_head_dim})", "leave rotary out (or true) with mla", also="mla")

    def _check_hybrid(self, hy: "HybridSpec") -> None:
        # each refusal names its field (was "(top level): hybrid.mamba: ...", at the file's first line)
        if hy.layers != self.layers:
            raise field_error("hybrid.pattern", f"has {hy.layers} layers, but layers is {self.layers}",
                              "one character (M * - E) per layer, | not counted", also="layers")  # fuzz27
        has_e = "E" in hy.pattern
        if has_e != (self.moe is not None):
            raise (field_error("hybrid.pattern", "E layers but no moe block", "a moe block for the E layers, or no E",
                               also="moe")
                   if has_e else field_error("moe", "moe is set but hybrid.pattern has no E layer",
                                             "E for each MoE layer, or no moe block", also="hybrid.pattern"))
        if self.moe is not None and (self.moe.every != 1 or self.moe.first_dense != 0):
            raise field_error("moe.every" if self.moe.every != 1 else "moe.first_dense", "set with a hybrid pattern",
                              "leave it out: the pattern's E places the MoE layers")
        for bad, name in ((self.mla is not None, "mla"), (self.parallel_block, "parallel_block"),
                          (self.mtp_layers > 0 and hy.mtp_pattern is None, "mtp_layers"),
                          (self.norms_per_layer != 2, "norms_per_layer")):
            if bad:
                raise field_error(name, "not modelled with a hybrid pattern", "standard attention (*), one pre-norm "
                                  "per layer (implied), MTP modules only with hybrid.mtp_pattern")
        if hy.mtp_pattern is not None and (hy.mtp_pattern == "*E") != (self.moe is not None):
            raise field_error("hybrid.mtp_pattern", f"{hy.mtp_pattern} does not match the model's MLP kind",
                              "*E with a moe block, *- without")
        if hy.mamba is not None and "M" not in hy.pattern:
            # round 21: its widths were dropped without a word (and never checked: heads 3 of groups 8 ran), as a
            # moe block without E layers is refused above
            raise field_error("hybrid.mamba", "set but hybrid.pattern has no M layer",
                              "M for each Mamba-2 layer, or no mamba block", also="hybrid.pattern")
        m = hy.mamba or MambaSpec()
        if "M" in hy.pattern:
            heads = m.heads or (m.expand * self.hidden) // m.head_dim
            if m.heads is None and (m.expand * self.hidden) % m.head_dim:
                raise field_error("hybrid.mamba.head_dim", f"expand x hidden = {m.expand * self.hidden} is not a "
                                  f"multiple of head_dim {m.head_dim}", "give heads, or a head_dim that divides it")
            if heads % m.groups:
                raise field_error("hybrid.mamba.groups", f"heads {heads} is not a multiple of groups {m.groups}",
                                  "groups that divide the Mamba heads (MambaMixer asserts nheads % ngroups == 0)",
                                  also="hybrid.mamba")  # fuzz27: --set model.hybrid.mamba.heads was refused at groups

    @property
    def ffn(self) -> int:
        return self.ffn_hidden or 4 * self.hidden

    @property
    def kv(self) -> int:
        return self.kv_heads or self.heads


class GenericWorkload(Sourced, kw_only=True, tag_field="kind", tag="generic"):
    name: str
    description: str = ""
    params: Count
    flops_per_sample: Annotated[Flops, Meta(description="FORWARD FLOPs per sample (training = fwd + bwd)")]
    backward_factor: Annotated[float, Meta(gt=0, description="backward FLOPs / forward FLOPs")] = 2.0
    activation_bytes_per_sample: Bytes | None = None
    input_bytes_per_sample: Bytes | None = None
    time_per_sample: Annotated[Seconds | None, Meta(
        description="measured single-GPU training time per sample (fwd+bwd); overrides the roofline")] = None
    family: Annotated[Literal["cnn", "mlp", "generic"], Meta(description=(
        "model family, with training.optimizer the staleness penalty's kappa group "
        "(scalemodel/data/staleness_kappa.json): cnn | mlp | generic"))] = "generic"

    @property
    def kind(self) -> Literal["generic"]:
        return "generic"


def _workload_kind(v: Any) -> str:
    if isinstance(v, dict):
        kind = v.get("kind")
        if kind in ("transformer", "generic"):
            return str(kind)
        if kind is not None:
            return str(kind)
        return "transformer" if "layers" in v else "generic"
    return str(getattr(v, "kind", "transformer"))


Workload = Annotated[TransformerWorkload | GenericWorkload, Discriminator(_workload_kind)]
