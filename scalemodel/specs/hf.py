"""HuggingFace ``config.json`` -> the fields of a transformer workload.

Every key that changes parameters, FLOPs, memory or communication is read for the families in wide
use (Llama 1-3, Mistral/Mixtral, Qwen 2/2.5/3 and their MoE variants, Gemma 1-3, Phi-3, Falcon,
GPT-2, GPT-J, GPT-NeoX, OPT, BLOOM, DeepSeek V2/V3), under each of its spellings (``n_layer`` /
``num_hidden_layers``, ``num_kv_heads`` / ``n_head_kv`` / ``num_key_value_heads``, ``n_routed_experts``
/ ``num_routed_experts`` / ``num_local_experts`` / ``num_experts``, ...). Defaults that the config
leaves to the model class (``tie_word_embeddings``, the MLP gating, linear biases, a parallel block)
are taken from the HuggingFace ``transformers`` configuration and modelling classes of each family.

A key outside :data:`HARMLESS` (keys known not to change the training cost: token ids, dropout,
norm epsilons, rotary settings, router loss weights...) and not read here is reported as a warning
naming it (:mod:`scalemodel.specs.notices`), never dropped silently. So is every default guessed for
an unknown ``model_type``, a key that is understood but not modelled (attention-only biases), and a
sequence length taken from the inference context ``max_position_embeddings``. ``num_nextn_predict_layers``
(DeepSeek-V3's multi-token prediction modules) becomes ``mtp_layers``.
"""

from __future__ import annotations

from typing import Any

from scalemodel.errors import InputError
from scalemodel.specs import notices
from scalemodel.specs.base import MAX_SPEC_INT

#: Upper bounds for the integer fields of a HuggingFace config (far above any published model). Counts of layers
#: (``layers``, and ``every``, ``first_dense``, ``pattern`` which count layers too) take the workload spec's bound,
#: :data:`~scalemodel.specs.base.MAX_SPEC_INT`, so that a depth a workload YAML accepts a config.json accepts as well.
_HF_MAX = {"layers": MAX_SPEC_INT, "hidden": 10**6, "heads": 10**5, "kv_heads": 10**5, "head_dim": 10**5,
           "ffn_hidden": 10**7, "vocab": 10**8, "seq_len": 10**9, "experts": 10**5, "top_k": 10**5,
           "moe_ffn": 10**7, "shared_experts": 10**5, "shared_ffn": 10**8, "every": MAX_SPEC_INT,
           "first_dense": MAX_SPEC_INT, "positions": 10**9, "window": 10**9, "pattern": MAX_SPEC_INT, "rank": 10**6,
           "mtp": 1000, "proj": 10**6, "state_dim": 10**5, "groups": 10**5, "conv_kernel": 10**3, "expand": 100,
           "chunk_size": 10**6, "moe latent size": 10**6, "norms": 2}

#: Marks a workload whose ``seq_len`` came from the config's context length (see :func:`seq_len_note`).
SEQ_FROM_CONFIG = "config.json context length"

# Families by HuggingFace model_type. Gated MLP (SwiGLU/GeGLU): LlamaMLP-style gate/up/down projections.
GATED = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3",
         "gemma3_text", "phi3", "deepseek_v2", "deepseek_v3", "olmo", "olmo2", "internlm2", "cohere", "gpt_oss"}
NOT_GATED = {"gpt2", "gptj", "gpt_neox", "opt", "bloom", "falcon", "refinedwebmodel", "refinedweb", "gpt_bigcode",
             "phi", "starcoder2", "nemotron_h"}
#: tie_word_embeddings when the config does not say (each family's transformers config class default).
TIE_DEFAULT = {"llama": False, "mistral": False, "mixtral": False, "qwen2": False, "qwen2_moe": False,
               "qwen3": False, "qwen3_moe": False, "gemma": True, "gemma2": True, "gemma3": True, "gemma3_text": True,
               "phi3": False, "deepseek_v2": False, "deepseek_v3": False, "gpt2": True, "gptj": False,
               "gpt_neox": False, "opt": True, "bloom": True, "falcon": True, "refinedwebmodel": True,
               "refinedweb": True, "gpt_bigcode": True, "phi": False, "starcoder2": True, "olmo": False,
               "olmo2": False, "nemotron_h": False, "gpt_oss": False}
#: Learned absolute position embeddings: model_type -> (key, extra rows). OPT keeps 2 offset rows
#: (OPTLearnedPositionalEmbedding, offset = 2).
LEARNED_POSITIONS = {"gpt2": ("n_positions", 0), "gpt_bigcode": ("n_positions", 0),
                     "opt": ("max_position_embeddings", 2)}
#: Families without rotary embeddings or a learned table (workload rotary false): BLOOM's ALiBi (transformers
#: models/bloom/modeling_bloom.py build_alibi_tensor, added to the attention scores) and Nemotron-H, whose attention
#: layers have no position encoding (models/nemotron_h/modeling_nemotron_h.py NemotronHAttention has no rotary
#: embedding; Megatron-Bridge mamba_provider.py position_embedding_type "none").
NO_ROTARY = frozenset({"bloom", "nemotron_h"})

#: Dropout rates of the residual stream and attention (transformers' names per family): all stated and 0 ->
#: workload.dropout false (no dropout masks stored, scalemodel.cost.memory); any > 0 or none stated -> the default.
DROPOUT_KEYS = ("attention_dropout", "hidden_dropout", "dropout", "attn_pdrop", "resid_pdrop", "embd_pdrop",
                "hidden_dropout_prob", "attention_probs_dropout_prob")

#: torch dtype names as transformers writes ``torch_dtype`` / ``dtype`` (``PretrainedConfig.to_dict`` keeps
#: ``str(torch.bfloat16).split(".")[1]``, transformers configuration_utils.py ``dict_torch_dtype_to_str``), and "auto".
#: The value changes nothing priced (training.precision sets the element), but one outside these is a typo or a
#: config from another tool, said in a warning rather than dropped without a word.
TORCH_DTYPES = frozenset("""
float32 float float64 double float16 half bfloat16 float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz
float8_e8m0fnu float4_e2m1fn_x2 int8 uint8 int16 int32 int64 bool complex64 complex128 auto
""".split())

#: Keys that change nothing the cost model sees (ids, dropout, epsilons, rotary/ALiBi settings,
#: router loss weights and routing rules, kernels, bookkeeping). GPT-OSS's (openai/gpt-oss-120b config.json;
#: huggingface/transformers@0261a467 models/gpt_oss/modular_gpt_oss.py): swiglu_limit / swiglu_alpha, the experts'
#: clamped SwiGLU (an elementwise op; Megatron-Core's eager clamp is strategy eager_glu_clamp), initial_context_length
#: (YaRN's original context), experts_per_token (OpenAI's copy of num_experts_per_tok).
HARMLESS = frozenset("""
_name_or_path architectures auto_map model_type transformers_version torch_dtype dtype use_bfloat16
bos_token_id eos_token_id pad_token_id unk_token_id sep_token_id cls_token_id decoder_start_token_id
image_token_index image_token_id boi_token_index eoi_token_index mm_tokens_per_image
initializer_range initializer_factor init_std rms_norm_eps layer_norm_eps layer_norm_epsilon norm_epsilon
rope_theta rope_scaling rope_parameters rope_local_base_freq rotary_emb_base rotary_pct rotary_dim
partial_rotary_factor rope_interleave alibi offset_alibi use_cache attention_dropout hidden_dropout dropout
attn_pdrop embd_pdrop resid_pdrop summary_type summary_use_proj summary_activation summary_proj_to_labels
summary_first_dropout hidden_dropout_prob attention_probs_dropout_prob activation_dropout layerdrop
classifier_dropout hidden_act hidden_activation activation_function pretraining_tp quantization_config
task_specific_params tokenizer_class scale_attn_weights reorder_and_upcast_attn scale_attn_by_inverse_layer_idx
output_attentions output_hidden_states return_dict use_return_dict torchscript is_decoder
apply_residual_connection_post_layernorm skip_bias_add skip_bias_add_qkv slow_but_exact masked_softmax_fusion
attention_softmax_in_fp32 bias_dropout_fusion _attn_implementation attn_implementation router_aux_loss_coef
router_jitter_noise output_router_logits aux_loss_alpha seq_aux norm_topk_prob routed_scaling_factor scoring_func
topk_method n_group topk_group ep_size query_pre_attn_scalar attn_logit_softcapping final_logit_softcapping
cache_implementation do_layer_norm_before _remove_final_layer_norm use_sliding_window max_window_layers
use_qk_norm qk_layernorm label2id id2label problem_type finetuning_task prefix max_length chunk_size_feed_forward
tie_word_embeddings n_ctx text_config embedding_multiplier lm_head_multiplier logits_scaling
moe_layer_freq decoder_sparse_step first_k_dense_replace mlp_only_layers sliding_window sliding_window_pattern
layer_types attention_bias mlp_bias is_encoder_decoder
embd_pdrop rotary_emb_fraction use_rotary_position_embeddings position_embedding_type original_max_position_embeddings
gradient_checkpointing rotary sliding_window_size
swiglu_limit swiglu_alpha initial_context_length experts_per_token
""".split())

_KEYS = {  # field -> the spellings accepted, first match wins
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num", "num_query_groups"),
    "head_dim": ("head_dim",),
    "ffn_hidden": ("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"),
    "vocab": ("vocab_size", "padded_vocab_size"),
    "seq_len": ("max_position_embeddings", "n_positions", "n_ctx", "seq_length", "max_sequence_length"),
    "experts": ("n_routed_experts", "num_routed_experts", "num_local_experts", "num_experts", "moe_num_experts"),
    "top_k": ("num_experts_per_tok", "moe_top_k", "num_selected_experts"),
    "moe_ffn": ("moe_intermediate_size", "expert_intermediate_size"),
    "shared_experts": ("n_shared_experts", "num_shared_experts"),
    "shared_ffn": ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"),
}

#: NemotronH (hybrid Mamba-2 / attention / MLP / MoE; huggingface/transformers 13923c63d
#: src/transformers/models/nemotron_h/configuration_nemotron_h.py NemotronHConfig): layer kinds of ``layers_block_type``
#: (``layer_types``) as Megatron's pattern symbols (the config's own ``_list_to_pattern``; "mamba" and "attention", the
#: older names its remap_legacy_layer_types migrates, too), and the Mamba-2 keys with their aliases and the config
#: class's defaults (workload field, keys, default).
HYBRID_KINDS = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*", "mlp": "-",
                "moe": "E"}
MAMBA_KEYS = (("state_dim", ("ssm_state_size",), 128), ("heads", ("mamba_num_heads",), 128),
              ("head_dim", ("mamba_head_dim",), 64), ("groups", ("n_groups", "mamba_n_groups"), 8),
              ("conv_kernel", ("conv_kernel", "mamba_d_conv"), 4), ("expand", ("expand", "mamba_expand"), 2),
              ("chunk_size", ("chunk_size", "mamba_chunk_size"), 128))
#: NemotronH keys that change nothing the cost model sees (activations, kernels, dt initialisation, cache, MTP layout
#: when there is no MTP module, routing rules).
HYBRID_HARMLESS = frozenset("""
mamba_hidden_act use_mamba_kernels time_step_min time_step_max time_step_limit time_step_floor mamba_dt_min mamba_dt_max
mamba_dt_limit mamba_dt_init_floor use_conv_bias mamba_conv_bias mamba_proj_bias mamba_ssm_cache_dtype residual_in_fp32
rescale_prenorm_residual num_logits_to_keep mlp_hidden_act use_bias moe_shared_expert_overlap mtp_layers_block_type
mtp_hybrid_override_pattern
""".split())


def hybrid_pattern(cfg: dict[str, Any]) -> str | None:
    """A NemotronH config's layer pattern in Megatron's symbols (``hybrid_override_pattern``, or ``layers_block_type`` /
    ``layer_types`` mapped by :data:`HYBRID_KINDS`), None when the config has neither; InputError on a kind the
    model has no cost for."""
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            raise InputError(f"expected a string, got {str(pattern)[:40]!r}", where="hybrid_override_pattern",
                             allowed="one character per layer: M * - E")
        # refused here, at the config's key: the workload's hybrid.pattern (named before) is not in the file, and an
        # empty or all-'|' pattern was refused as "num_hidden_layers: 0 is out of range" where the file said 52
        bad = sorted({c for c in pattern if c not in "M*-E|"})
        if bad:
            raise InputError(f"unknown layer character(s) {''.join(bad)[:40]!r}", where="hybrid_override_pattern",
                             allowed="M (Mamba-2), * (attention), - (MLP), E (MoE), | (pipeline-stage boundary)")
        _check_pattern_size(pattern, "hybrid_override_pattern")
        listed = _listed_pattern(cfg)
        if listed is not None and listed[1] != pattern.replace("|", ""):
            # two descriptions of the layers that disagree: the pattern was priced and the list dropped without a word
            raise InputError(f"{listed[0]} gives {_kinds_shown(listed[1])}, hybrid_override_pattern "
                             f"{_kinds_shown(pattern.replace('|', ''))}",
                             where=f"hybrid_override_pattern / {listed[0]}",
                             allowed="one of them, or both describing the same layers")
        return pattern
    listed = _listed_pattern(cfg)
    return None if listed is None else listed[1]


def _kinds_shown(pattern: str) -> str:
    """A layer pattern shortened for a message: its length and its first layers."""
    return f"{len(pattern):,} layers ({pattern[:24]}{'...' if len(pattern) > 24 else ''})"


def _listed_pattern(cfg: dict[str, Any]) -> tuple[str, str] | None:
    """(key, pattern) of a NemotronH config's ``layers_block_type`` / ``layer_types`` list, or None."""
    archs = cfg.get("architectures")
    nemotron_h = cfg.get("model_type") == "nemotron_h" or (
        isinstance(archs, list) and any(isinstance(a, str) and a.startswith("NemotronH") for a in archs))
    for key in ("layers_block_type", "layer_types"):
        kinds = cfg.get(key)
        # layer_types is also the sliding/full list of Gemma, Qwen3-Next (whose "linear_attention" is Gated DeltaNet,
        # not Mamba-2) and others: read as NemotronH kinds only in a NemotronH config or where it names "mamba"
        ours = key == "layers_block_type" or nemotron_h or (isinstance(kinds, list) and "mamba" in kinds)
        if nemotron_h and kinds is not None and not (isinstance(kinds, list) and kinds):
            # round 16: in a NemotronH config an empty list or a mapping was passed over, and the file priced as a
            # plain transformer of num_hidden_layers (an MLP in every layer) under "keys not understood"
            raise InputError(f"expected a non-empty list of layer kinds, got {str(kinds)[:40]!r}", where=key,
                             allowed="one kind per layer: linear_attention (Mamba-2), full_attention, mlp, moe")
        if ours and isinstance(kinds, list) and (nemotron_h or any(k in ("linear_attention", "mamba", "moe", "mlp")
                                                                   for k in kinds)):
            # in a NemotronH config every list is its layers (round 16: ["hybrid"] x 52, kinds none of them
            # modelled, was priced as a plain transformer, and a list of attention layers only as attention + MLP)
            # a list or mapping among the kinds is not a kind (``k in HYBRID_KINDS`` raised TypeError: unhashable)
            bad = sorted({str(k)[:40] for k in kinds if not (isinstance(k, str) and k in HYBRID_KINDS)})
            if bad:
                raise InputError(f"layer kind(s) {', '.join(bad[:5])} not modelled", where=key,
                                 allowed="linear_attention (Mamba-2), full_attention, mlp, moe")
            pattern = "".join(HYBRID_KINDS[k] for k in kinds)
            _check_pattern_size(pattern, key)
            return key, pattern
    return None


def _check_pattern_size(pattern: str, key: str) -> None:
    """A hybrid pattern of 1 to the workload's 100,000 layers (workload.HybridSpec), refused at the config's key."""
    layers = len(pattern.replace("|", ""))
    if not layers or len(pattern) > 100_000:
        raise InputError("no layer" if not layers else f"{len(pattern):,} entries", where=key,
                         allowed="1 to 100,000 layers (M * - E), | not counted")


def _integer(cfg: dict[str, Any], key: str, field: str, minimum: int) -> int:
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"expected an integer, got {str(v)[:40]!r}", where=key,
                         allowed=f"a positive integer ({field})")
    top = _HF_MAX[field]
    if not minimum <= v <= top:
        shown = f"{top:.0e}" if top >= MAX_SPEC_INT else str(top)  # the spec's bound as the spec writes it
        raise InputError(f"{v} is out of range", where=key, allowed=f"an integer from {minimum} to {shown} ({field})")
    return v


def _flag(cfg: dict[str, Any], key: str, default: bool) -> bool:
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise InputError(f"expected true or false, got {str(v)[:40]!r}", where=key,
                         allowed="true or false (a JSON boolean)")
    return v


def _falcon_norms(cfg: dict[str, Any], new_arch: bool) -> int:
    """LayerNorms per Falcon block as transformers' ``FalconDecoderLayer.__init__`` builds them
    (huggingface/transformers@00dcc6dd src/transformers/models/falcon/modeling_falcon.py): without ``parallel_attn``
    two (input and post-attention); with it two (``ln_attn``, ``ln_mlp``) when ``num_ln_in_parallel_attn`` is 2 (null
    under ``new_decoder_architecture`` is 2), else one. fuzz33: the key was read by ``or`` and not checked: a string
    "2" was taken, 0 fell to the default, and -5 or 3 were refused at ``norms_per_layer``, a field the config lacks."""
    given = None if cfg.get("num_ln_in_parallel_attn") is None else _integer(cfg, "num_ln_in_parallel_attn", "norms", 1)
    if not _flag(cfg, "parallel_attn", True):
        return 2
    return 2 if (2 if given is None and new_arch else given) == 2 else 1


def _pattern(layer_types: Any, layers: int) -> tuple[bool, int, str]:
    """``layer_types`` (a list of 'sliding_attention' / 'full_attention') -> (any local layer, every
    k-th global, note when the list is not of that form)."""
    if (not isinstance(layer_types, list) or len(layer_types) != layers
            or not all(isinstance(x, str) for x in layer_types)):
        return False, 0, f"layer_types is not a list of {layers} layer names"
    # a name other than the two (a typo such as 'full-attention', Llama 4's 'chunked_attention', Qwen3-Next's
    # 'linear_attention') was read as a sliding-window layer without a word: it is full attention here, and named
    other = sorted({x for x in layer_types if x not in ("sliding_attention", "full_attention")})
    unknown = (f"layer_types names {', '.join(repr(x[:40]) for x in other[:3])}{', ...' if len(other) > 3 else ''} "
               "(read: sliding_attention, full_attention): modelled as full attention in those layers") if other else ""
    local = [x == "sliding_attention" for x in layer_types]
    if not any(local):
        return False, 0, unknown
    if all(local):
        return True, 0, unknown
    k = local.index(False) + 1
    if all(local[i] == ((i + 1) % k != 0) for i in range(layers)):
        return True, k, unknown
    return True, k, "; ".join(filter(None, (unknown, f"layer_types is not 'every {k}-th layer global': modelled as "
                                            f"{layers - layers // k} local layers of {layers} (the list has "
                                            f"{sum(local)})")))


def from_hf_config(cfg: dict[str, Any], name: str, *, where: str = "config.json") -> dict[str, Any]:
    """Map a HuggingFace ``config.json`` onto the transformer workload fields (module docstring).

    Each value used is checked so that an error names the config's own key: integers (not booleans,
    not strings), positive, within :data:`_HF_MAX`; heads dividing hidden (without ``head_dim``), at
    most as many heads as hidden units, key/value heads dividing heads, and MoE layer settings
    within the layer count. Warnings go to :func:`scalemodel.specs.notices.warn`, prefixed ``where``.
    """
    def warn(text: str) -> None:
        notices.warn(f"{where}: {text}")

    text_cfg = cfg.get("text_config")
    if "vision_config" in cfg and not (isinstance(text_cfg, dict) and not any(k in cfg for k in _KEYS["layers"])):
        warn("vision_config: the vision tower is not counted, only the language model")
    if isinstance(text_cfg, dict) and not any(k in cfg for k in _KEYS["layers"]):
        warn("a multimodal config: the text model (text_config) is modelled, the vision tower is not counted")
        outer = cfg
        cfg = dict(text_cfg)
        for key in ("model_type", "tie_word_embeddings"):
            if key not in cfg and key in outer:
                cfg[key] = outer[key]
    read: set[str] = {"num_nextn_predict_layers"}
    used: dict[str, str] = {}
    pattern = hybrid_pattern(cfg)
    if pattern is not None:
        read.update(("hybrid_override_pattern", "layers_block_type", "layer_types", "num_hidden_layers") + tuple(
            k for _, keys, _ in MAMBA_KEYS for k in keys) + tuple(HYBRID_HARMLESS))
        n = len(pattern.replace("|", ""))
        stated = cfg.get("num_hidden_layers")
        if stated is not None and stated != n:
            notices.warn(f"{where}: num_hidden_layers {str(stated)[:20]} differs from the {n} layers of the hybrid "
                         "pattern: the pattern's used (as transformers' NemotronHConfig does)")
        cfg = {**cfg, "num_hidden_layers": n}

    def first(field: str, *, required: bool = False, minimum: int = 1, keys: tuple[str, ...] | None = None) -> Any:
        for k in keys or _KEYS[field]:
            if k in cfg:
                read.add(k)
            if cfg.get(k) is not None:
                used[field] = k
                return _integer(cfg, k, field, minimum)
        if required:
            raise InputError("missing", where=" or ".join(keys or _KEYS[field]), allowed=f"the model's {field}")
        return None

    layers = first("layers", required=True)  # before any warning: a config missing them is one error line
    hidden = first("hidden", required=True)
    heads = first("heads", required=True)
    vocab = first("vocab", required=True)
    for key in ("torch_dtype", "dtype"):
        dtype = cfg.get(key)
        if dtype is not None and str(dtype).strip().lower().removeprefix("torch.") not in TORCH_DTYPES:
            warn(f"{key} {str(dtype)[:40]!r} is not a torch dtype (float32, bfloat16, float16, float8_e4m3fn, auto, "
                 "...): ignored; the element priced is training.precision's")
    model_type = str(cfg.get("model_type") or "").lower()
    act = str(cfg.get("hidden_act") or cfg.get("hidden_activation") or cfg.get("activation_function") or "").lower()
    if model_type in GATED:
        gated = True
    elif model_type in NOT_GATED:
        gated = False
    else:
        gated = act in ("silu", "swiglu", "swish", "geglu")
        warn(f"model_type {model_type[:40] or '(none)'!r} is not a known family: "
             f"{'a gated' if gated else 'an ungated'} MLP assumed from hidden_act {act[:40] or '(none)'!r}, "
             "check the parameter count")

    kv_heads = first("kv_heads")
    head_dim = first("head_dim")
    ffn = first("ffn_hidden")
    biases: bool | None
    norm_biases: bool | None = None  # the workload's default (biases and not gated) unless a family says otherwise
    if model_type in ("falcon", "refinedwebmodel", "refinedweb"):
        # FalconConfig: new_decoder_architecture (40B/180B) -> num_kv_heads groups and two norms;
        # otherwise multi_query (7B) -> one K/V head; parallel_attn -> one norm shared by both branches.
        new_arch = _flag(cfg, "new_decoder_architecture", False)
        parallel = _flag(cfg, "parallel_attn", True) or new_arch
        if not new_arch and _flag(cfg, "multi_query", True):
            kv_heads = 1
        elif not new_arch:
            kv_heads = None
        norms = _falcon_norms(cfg, new_arch)
        biases = _flag(cfg, "bias", False)
        # FalconDecoderLayer's norms are torch LayerNorms (weight and bias) whatever ``bias`` says of the linears
        # (huggingface/transformers@44272086 models/falcon/modeling_falcon.py; tiiuae/falcon-7b's safetensors total
        # 6,921,720,704 counts them: review32b)
        norm_biases = True
        read.update(("new_decoder_architecture", "parallel_attn", "multi_query", "num_ln_in_parallel_attn", "bias",
                     "num_kv_heads", "n_head_kv"))
    elif model_type == "gptj" or model_type == "phi":
        parallel, norms, biases = True, 1, True  # GPTJBlock / PhiDecoderLayer: one LayerNorm, attn + MLP summed
    elif model_type == "gpt_neox":
        parallel = _flag(cfg, "use_parallel_residual", True)  # GPTNeoXLayer: two LayerNorms either way
        norms, biases = 2, True
        read.add("use_parallel_residual")
    else:
        parallel, norms = False, 2
        biases = None if gated else True
        if model_type == "opt":
            biases = _flag(cfg, "enable_bias", True)
            read.update(("enable_bias", "word_embed_proj_dim"))
        elif model_type == "nemotron_h":
            # NemotronH: RMSNorm layers and linear biases only with use_bias / mlp_bias (transformers 13923c63d
            # configuration_nemotron_h.py NemotronHConfig: use_bias False, mlp_bias False; modeling_nemotron_h.py
            # NemotronHRMSNorm), not the GPT-style biases an ungated MLP otherwise implies
            biases = _flag(cfg, "use_bias", False) or _flag(cfg, "mlp_bias", False)
            norm_biases = False  # RMSNorm whatever use_bias / mlp_bias say (review32b: the default gave it a bias)
        elif model_type == "gpt_oss":
            biases = True  # GPT-OSS: RMSNorm (no norm bias: norm_biases' default for a gated MLP) and linear biases
            if not _flag(cfg, "attention_bias", True):
                warn("attention_bias false: the attention's Q/K/V/O biases ((heads + 2 kv_heads) head_dim + hidden "
                     "a layer) are counted with the experts' and router's, which GPT-OSS always has")
    for key in ("attention_bias", "mlp_bias"):
        if _flag(cfg, key, False) and gated and model_type != "gpt_oss":
            warn(f"{key} true: these linear biases are not counted (a few parameters per layer)")
    if model_type in ("qwen2", "qwen2_moe") and gated:
        pass  # Qwen2 Q/K/V biases: (a + 2g) d per layer, under 0.01 % of the parameters

    tie_default = TIE_DEFAULT.get(model_type)
    if tie_default is None and "tie_word_embeddings" not in cfg:
        warn("tie_word_embeddings not given for an unknown model_type: tied assumed (the transformers default)")
    tie = _flag(cfg, "tie_word_embeddings", True if tie_default is None else tie_default)

    # sequence length: the config holds the inference context, not the training length
    seq_len = first("seq_len")
    positions = 0
    if model_type in LEARNED_POSITIONS:
        key, extra = LEARNED_POSITIONS[model_type]
        if cfg.get(key) is not None:
            positions = _integer(cfg, key, "positions", 1) + extra
    if model_type == "opt":
        proj = cfg.get("word_embed_proj_dim")
        if proj is not None and _integer(cfg, "word_embed_proj_dim", "proj", 1) != hidden:
            warn(f"word_embed_proj_dim {proj} differs from hidden_size {hidden}: the project_in/project_out "
                 "matrices are not counted")

    out: dict[str, Any] = {
        "kind": "transformer",
        "name": name,
        "description": f"from HuggingFace config ({model_type[:60] or 'unknown type'})",
        "layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
        "ffn_hidden": ffn, "vocab": vocab, "seq_len": 2048 if seq_len is None else seq_len,
        "gated_mlp": gated, "tied_embeddings": tie, "biases": biases, "norm_biases": norm_biases,
        "position_embeddings": positions,
        "rotary": False if model_type in NO_ROTARY else None,
        "parallel_block": parallel, "norms_per_layer": norms,
        # transformers' ACT2FN "relu2" = ReLUSquaredActivation, relu(x)^2 (Nemotron-4's NemotronConfig default)
        "squared_relu": act == "relu2" and not gated,
        "sources": {"shape": f"HuggingFace config.json ({where[:200]}, model_type {model_type[:60] or 'none'})",
                    "seq_len": (f"{SEQ_FROM_CONFIG}: {used['seq_len']} = {seq_len}" if seq_len is not None else
                                f"{SEQ_FROM_CONFIG}: none given, 2048 assumed")},
    }
    rates = {k: cfg[k] for k in DROPOUT_KEYS if isinstance(cfg.get(k), (int, float)) and not isinstance(cfg[k], bool)}
    if rates and all(float(v) == 0.0 for v in rates.values()):
        out["dropout"] = False
        out["sources"]["dropout"] = "HuggingFace config.json: " + ", ".join(f"{k} {v}" for k, v in rates.items())
    if heads > hidden and head_dim is None:
        raise InputError(f"{heads} attention heads for {hidden} hidden units", where=used["heads"],
                         allowed=f"at most {used['hidden']} heads")
    if head_dim is None and hidden % heads:
        raise InputError(f"{used['hidden']} {hidden} is not a multiple of {used['heads']} {heads}", where=used["heads"],
                         allowed="a divisor of the hidden size (or give head_dim)")
    if kv_heads is not None and heads % kv_heads:
        raise InputError(f"{used['heads']} {heads} is not a multiple of {kv_heads}",
                         where=used.get("kv_heads", "multi_query"),
                         allowed="a divisor of the number of attention heads")

    # sliding-window attention
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    use_window = _flag(cfg, "use_sliding_window", True) if "use_sliding_window" in cfg else True
    if window is not None and use_window:
        out["sliding_window"] = _integer(cfg, "sliding_window", "window", 1)
        if types is not None:
            local, k, note = _pattern(types, layers)
            if note:
                warn(note)
            if not local:
                out.pop("sliding_window")
            out["sliding_window_pattern"] = k
        elif cfg.get("sliding_window_pattern") is not None:
            out["sliding_window_pattern"] = _integer(cfg, "sliding_window_pattern", "pattern", 0)
        elif model_type in ("gemma2", "gpt_oss"):
            # Gemma2DecoderLayer, and GptOssConfig's default layer_types (sliding where (i + 1) % 2): every other
            # layer is global
            out["sliding_window_pattern"] = 2
        if "max_window_layers" in cfg and "use_sliding_window" in cfg:
            warn("use_sliding_window with max_window_layers: modelled as sliding-window attention in every layer")

    # multi-head latent attention (DeepSeek-V2/V3)
    if cfg.get("kv_lora_rank") is not None:
        mla_keys = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
        read.update(mla_keys)
        mla: dict[str, int] = {}
        for mk in mla_keys:
            if cfg.get(mk) is None:
                if mk == "q_lora_rank":
                    mla[mk] = 0  # DeepSeek-V2-Lite: full-rank queries
                    continue
                raise InputError("missing", where=mk, allowed="the MLA widths (kv_lora_rank needs all five)")
            if mk == "q_lora_rank" and cfg[mk] == 0 and not isinstance(cfg[mk], bool):
                # transformers' DeepseekV2/V3Attention test ``q_lora_rank is None`` for full-rank queries (q_proj);
                # 0 builds q_a_proj h -> 0 and q_b_proj 0 -> heads x qk_head_dim: a zero-width query, not a model
                # (huggingface/transformers@00b676f8 models/deepseek_v3/modeling_deepseek_v3.py DeepseekV3Attention;
                # @0233e509 models/deepseek_v2/modeling_deepseek_v2.py DeepseekV2Attention)
                raise InputError("0 builds a zero-width query projection in transformers (only null means no query "
                                 "compression)", where=mk, allowed="null (full-rank queries) or a positive integer")
            mla[mk] = _integer(cfg, mk, "rank", 1)
        out["mla"] = mla
        out["kv_heads"] = out["head_dim"] = None  # MLA sets its own widths
    else:
        read.update(k for k in ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank")
                    if cfg.get(k) is None and k in cfg)

    # mixture of experts
    experts = first("experts", minimum=0)
    if experts:
        top_k = first("top_k")
        if top_k is None:
            top_k = 2
            warn("MoE config without num_experts_per_tok: 2 experts per token assumed")
        if top_k > experts:
            raise InputError(f"{top_k} experts per token of {experts}", where=used["top_k"],
                             allowed=f"at most {used['experts']} ({experts})")
        first_dense = first("first_dense", minimum=0, keys=("first_k_dense_replace",)) or 0
        if first_dense >= layers:
            raise InputError(f"{first_dense} leading dense layers of {layers}", where=used["first_dense"],
                             allowed=f"fewer than {used['layers']} ({layers})")
        every = first("every", keys=("moe_layer_freq", "decoder_sparse_step")) or 1
        if every > layers:
            raise InputError(f"one MoE layer every {every} of {layers} layers", where=used["every"],
                             allowed=f"at most {used['layers']} ({layers})")
        moe_ffn = first("moe_ffn")
        shared = first("shared_experts", minimum=0) or 0
        shared_ffn = first("shared_ffn", minimum=0)
        if shared_ffn:
            width = moe_ffn or ffn or 4 * hidden
            shared = max(1, round(shared_ffn / width))
            if shared * width != shared_ffn:
                warn(f"shared_expert_intermediate_size {shared_ffn} is not a multiple of the expert width {width}: "
                     f"modelled as {shared} shared expert(s) of width {width}")
        only = cfg.get("mlp_only_layers")
        if isinstance(only, list) and only:
            warn(f"mlp_only_layers {str(only)[:60]}: these dense layers are modelled as MoE layers")
        out["moe"] = {"experts": experts, "top_k": top_k, "ffn_hidden": moe_ffn, "shared_experts": shared,
                      "every": every, "first_dense": first_dense}
        # LatentMoE (NemotronH moe_latent_size; Megatron-Core TransformerConfig moe_latent_size): the routed experts
        # on l-wide tokens behind h -> l and l -> h projections (docs/model.md#latent-moe)
        read.add("moe_latent_size")
        if cfg.get("moe_latent_size") is not None:
            latent = _integer(cfg, "moe_latent_size", "moe latent size", 1)
            if latent >= hidden:
                raise InputError(f"{latent} is not below hidden_size {hidden}", where="moe_latent_size",
                                 allowed=f"1 to {hidden - 1}, or null (experts on the hidden size)")
            out["moe"]["latent_size"] = latent
    else:
        read.add("moe_latent_size")
        if cfg.get("moe_latent_size") is not None:
            warn("moe_latent_size given but no routed-expert count: modelled as dense")
        for field in ("top_k", "moe_ffn", "shared_experts", "shared_ffn"):
            for fk in _KEYS[field]:
                if cfg.get(fk) not in (None, 0):
                    warn(f"{fk} given but no routed-expert count ({', '.join(_KEYS['experts'])}): modelled as dense")
                read.add(fk)

    if pattern is not None:
        mamba: dict[str, int] = {}
        for field, keys, default in MAMBA_KEYS:
            given = next((k for k in keys if cfg.get(k) is not None), None)
            mamba[field] = default if given is None else _integer(cfg, given, field, 1)
        if "M" in pattern and mamba["heads"] % mamba["groups"]:  # named at the config's keys, not hybrid.mamba.groups
            given = next((k for k in ("n_groups", "mamba_n_groups") if cfg.get(k) is not None), "n_groups (default 8)")
            raise InputError(f"mamba_num_heads {mamba['heads']} is not a multiple of {given.split()[0]} "
                             f"{mamba['groups']}", where=given.split()[0],
                             allowed="groups that divide the Mamba heads (MambaMixer asserts nheads % ngroups == 0)")
        out["hybrid"] = {"pattern": pattern, "mamba": mamba}
        # NemotronH's MTP block (Nemotron 3 Super: "*E"): mtp_layers_block_type, else the legacy
        # mtp_hybrid_override_pattern, else transformers' default ["full_attention", "moe"] (NemotronHConfig
        # __post_init__, 13923c63d); priced as one attention + MoE / MLP layer
        kinds = cfg.get("mtp_layers_block_type")
        mtp_pattern: Any = cfg.get("mtp_hybrid_override_pattern") or "*E"
        if kinds is not None and not isinstance(kinds, list):  # was dropped silently, the default block priced
            raise InputError(f"expected a list of layer kinds, got {str(kinds)[:40]!r}", where="mtp_layers_block_type",
                             allowed='a JSON list, e.g. ["full_attention", "moe"]')
        if isinstance(kinds, list):
            mtp_pattern = "".join(HYBRID_KINDS.get(str(k), "?") for k in kinds)
        if cfg.get("num_nextn_predict_layers"):
            key = ("mtp_layers_block_type" if isinstance(kinds, list) else "mtp_hybrid_override_pattern"
                   if cfg.get("mtp_hybrid_override_pattern") else
                   'mtp_layers_block_type (not given: transformers\' default ["full_attention", "moe"])')
            if mtp_pattern not in ("*E", "*-"):
                # a kind the list holds is named as written: ["gdn"] was "MTP block pattern '?'"
                shown = str(kinds)[:60] if isinstance(kinds, list) else repr(str(mtp_pattern)[:40])
                raise InputError(f"MTP block {'layer kinds' if isinstance(kinds, list) else 'pattern'} {shown} "
                                 f"{'are' if isinstance(kinds, list) else 'is'} not modelled", where=key,
                                 allowed="*E or *- (attention, then MoE or MLP)")
            if (mtp_pattern == "*E") != ("moe" in out):  # was named at hybrid.mtp_pattern, a key the config lacks
                raise InputError(f"MTP block pattern {mtp_pattern!r} does not match the model's MLP kind "
                                 f"({'MoE' if 'moe' in out else 'dense'})", where=key,
                                 allowed="*E (full_attention, moe) with routed experts, *- (full_attention, mlp) "
                                         "without")
            out["hybrid"]["mtp_pattern"] = mtp_pattern
        out["sources"]["hybrid"] = ("HuggingFace config.json (NemotronH): layer pattern and Mamba-2 widths; absent "
                                    "keys take transformers' NemotronHConfig defaults")
    if cfg.get("num_nextn_predict_layers") is not None:
        # DeepSeek-V3 README_WEIGHTS.md: "num_nextn_predict_layers: Indicates the number of Multi-Token
        # Prediction (MTP) Modules"; priced as workload.mtp_layers (scalemodel.cost.transformer)
        out["mtp_layers"] = _integer(cfg, "num_nextn_predict_layers", "mtp", 0)
        if out["mtp_layers"]:
            out["sources"]["mtp_layers"] = f"HuggingFace config.json: num_nextn_predict_layers {out['mtp_layers']}"
    if cfg.get("is_encoder_decoder") is True:
        warn("an encoder-decoder config: only one stack of layers is modelled")
    unknown = sorted(k for k in cfg if k not in read and k not in HARMLESS)
    if unknown:
        more = f" and {len(unknown) - 20} more" if len(unknown) > 20 else ""
        shown = ", ".join(k[:60] for k in unknown[:20]) + more
        warn(f"keys not understood, which may change the model's shape: {shown}; check the parameter count "
             "or describe the model in a workload YAML")
    return {k: v for k, v in out.items() if v is not None}


def seq_len_note(workload: Any, training_seq_len: int | None, option: str = "--seq-len") -> str | None:
    """A warning when the training sequence length is the config's inference context (no --seq-len)."""
    src = str(getattr(workload, "sources", {}).get("seq_len", ""))
    if training_seq_len is not None or not src.startswith(SEQ_FROM_CONFIG):
        return None
    return (f"sequence length {workload.seq_len:,} is the model's context length from its config.json "
            f"({src.removeprefix(SEQ_FROM_CONFIG + ': ')}), not necessarily the training length; give {option}")
