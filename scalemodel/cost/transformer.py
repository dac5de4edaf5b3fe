"""Parameter and FLOP counts of a decoder/encoder transformer, from its shape alone.

Everything here is pure arithmetic on floats or numpy arrays (broadcasting), in SI units (FLOP,
parameters as counts). Shapes follow the HuggingFace/Megatron conventions:

* ``hidden`` h, ``heads`` a, ``kv_heads`` g (GQA; ``None``/0 means g = a), head dim d = h / a;
* ``ffn_hidden`` f (``None``/0 means 4h), ``gated_mlp`` (SwiGLU: 3 matrices h x f instead of 2);
* ``vocab`` V, ``tied_embeddings`` (input and output embedding share one V x h matrix);
* MoE: ``moe_experts`` E routed experts of width ``moe_ffn_hidden`` (0 means f), ``moe_top_k`` k
  routed experts per token, ``moe_shared_experts`` always-active experts, an MoE MLP on every
  ``moe_every``-th layer after the first ``moe_first_dense`` dense layers (DeepSeek-V3: 3);
  ``moe_latent`` l (LatentMoE, Nemotron 3 Super; 0 = off): the routed experts run at width l instead of h, behind
  a replicated h -> l projection before dispatch and l -> h after combine (Megatron-Core moe_layer.py
  ``fc1_latent_proj`` / ``fc2_latent_proj``, parallel_mode "duplicated"); router and shared experts stay at h.

Parameter count per layer (weights; linear biases when ``biases``, norm biases when ``norm_biases``):

    attention  = h*(a*d) [Q] + 2*h*(g*d) [K,V] + (a*d)*h [O]        (+ biases (a+2g)*d + h)
    dense MLP  = (3 if gated else 2) * h * f                       (+ biases (2 if gated else 1) f + h)
    MoE MLP    = (E + shared) * (3|2) * h * f_e + h*E [router]
                 LatentMoE: E * (3|2) * l * f_e + shared * (3|2) * h * f_e + h*E + 2*h*l [latent projections]
    norms      = 2 * h (RMSNorm, or LayerNorm without bias) or 4 * h (LayerNorm with bias: ``norm_biases``)
    total      = layers * per-layer + V*h * (1 if tied else 2) + final norm + learned positions

Multi-token prediction (``mtp_layers`` D; DeepSeek-AI 2024, arXiv:2412.19437 §2.2): module k takes the
hidden state of depth k-1 and the shared embedding of token i+k, RMSNorms both, concatenates them and
projects 2h -> h (M_k), runs one transformer block and the shared output head. Megatron-Core builds each
module's block from the decoder's last layer spec (gpt_layer_specs.py get_gpt_mtp_block_spec_for_backend,
"spec.layer_specs[-1]"), with an RMSNorm on each input (enorm, hnorm), eh_proj of 2h -> h and a
final_layernorm (multi_token_prediction.py MultiTokenPredictionLayer, core_v0.15.0). Per module:

    params  = layer(last kind) + 2 h^2 [eh_proj] + 3 h [enorm, hnorm, final norm]  (embedding, head shared)
    forward = 2 s (matrix params of the block) + core + 2 s (2h) h [eh_proj] + 2 s h V [shared head]

DeepSeek's published 671 B excludes the modules (README_WEIGHTS.md: "11.5B unique parameters" for the one
V3 module), so :func:`param_count` is the main model and :func:`training_param_count` adds the modules.

With a = g, f = 4h and biases this is Megatron's 12*l*h^2*(1 + 13/(12h) + (V+s)/(12*l*h))
[Narayanan et al. 2021, arXiv:2104.04473; docs/model.md#flops].

FLOPs (forward, one sequence of length s, 2 FLOP per multiply-accumulate):

    per layer  = 2*s*(params of the matrices a token passes through)   [GEMMs]
               + 4*s^2*a*d                                             [Q K^T and softmax . V]
    logits     = 2*s*h*V

Training model FLOPs = 3 x forward (backward = 2 x forward), the MTP modules included, as Megatron-Bridge's
flop_utils.py and Megatron-LM's num_floating_point_operations count them (the MTP layers as layers of the
last layer's kind, eh_proj, and the logits x (D + 1)); the 3 h norm MACs they add are not counted (no norm
FLOPs are, anywhere here); with ffn = 4h, a = g this is exactly
Megatron's 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)). Hardware FLOPs add the recomputation: full
recompute repeats the layers' forward (not the logits): 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h))
[Narayanan et al. 2021 §3 / Appendix]; selective recompute repeats what :func:`recomputed_modules` names: by
default only the attention core (4*s^2*a*d per layer) [Korthikanti et al. 2022, arXiv:2205.05198 §5].
The s^2 term counts the full (not causal-halved) score matrix, as Megatron and PaLM's MFU definition do
[arXiv:2204.02311 App. B].
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

import msgspec
import numpy as np

from scalemodel.choices import Recompute, codes
from scalemodel.cost.checks import all_finite_above, all_finite_nonnegative
from scalemodel.cost.mamba import LayerCounts, MambaDims, mamba_forward_flops, mamba_mixer_params, mamba_param_tensors
from scalemodel.errors import InputError

ArrayLike = Any  # float | np.ndarray; kept loose so callers can pass numbers or arrays

def recompute_code(value: ArrayLike) -> np.ndarray:
    """Recompute mode(s) as labels or :class:`~scalemodel.choices.Recompute` codes -> int array."""
    return codes(Recompute, value, "recompute")


#: Selective-recompute modules as bits: Megatron-Core ``--recompute-modules`` names (transformer_config.py
#: ``recompute_modules``), ``jax_dots`` for JAX's dots-saveable remat policy (cost.memory's module docstring),
#: ``titan_op`` for torchtitan's op-level selective AC policy (:func:`titan_op_gemms`) and ``jax_qkvo`` for MaxText's
#: named-tensor policies that save the Q, K, V and output projections only (:func:`mlp_up_flops`), ``jax_qkv`` for
#: those that save Q, K and V and rematerialize the output projection too (:func:`out_proj_flops`), and ``jax_context``
#: beside either for a policy that also keeps MaxText's ``context`` (the attention kernel's output and residuals, so the
#: core is not recomputed).
RECOMPUTE_MODULES: dict[str, int] = {"core_attn": 1, "mla_up_proj": 2, "moe_act": 4, "jax_dots": 8, "titan_op": 16,
                                     "moe": 32, "layernorm": 64, "mlp": 128,
                                     "shared_experts": 256, "jax_qkvo": 512, "jax_qkv": 1024, "jax_context": 2048}
#: What ``recompute: selective`` recomputes when no module is named: the attention core (Korthikanti).
DEFAULT_RECOMPUTE_MODULES = RECOMPUTE_MODULES["core_attn"]


class Recomputed(msgspec.Struct, frozen=True, eq=False):  # numpy fields: == has no single truth value
    """What selective recompute repeats in one layer's backward (bool arrays; all False unless selective):
    ``attention_core`` the core (core_attn, or jax_dots, whose policy recomputes the batched core matmuls with
    everything but the weight GEMMs), ``mla_up_proj`` MLA's Q and KV up-projections (only in an MLA model),
    ``moe_act`` the routed experts' activation function, ``jax_dots`` JAX's dots-saveable policy, ``titan_op``
    torchtitan's op policy (the layer's forward but the attention core and the saved GEMMs, :func:`titan_op_gemms`),
    ``moe`` the whole MoE block's forward (router, permutation, dispatch and combine, routed and shared experts),
    ``layernorm`` the norms that are modules of their own (:func:`recomputed_modules`: an MoE layer's pre-MLP norm,
    an MLA layer's input norm; a norm fused into a Transformer Engine LayerNormLinear is not one), ``mlp`` the dense
    MLP block's forward (its fused pre-MLP norm, up- and down-projections and activation) in a layer that is not an
    MoE layer, ``shared_experts`` the shared experts' forward in an MoE layer that has them, ``jax_qkvo`` MaxText's
    ``save_dot_except_mlp`` / ``save_dot_except_mlpwi`` (or ``custom`` with those names on 'device'): the attention
    core, the dense MLP's up-projections and the layer's norms and activation (:func:`mlp_up_flops`); also true under
    ``jax_qkv``, whose policy repeats all of that and the attention output projection, ``out_proj``
    (:func:`out_proj_flops`); ``context`` MaxText's ``context`` kept beside jax_qkvo / jax_qkv (``jax_context``): the
    attention kernel's output and log-sum-exp are saved, so ``attention_core`` is false under those policies."""

    attention_core: np.ndarray
    mla_up_proj: np.ndarray
    moe_act: np.ndarray
    jax_dots: np.ndarray
    titan_op: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))
    moe: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))
    layernorm: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))
    mlp: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))
    shared_experts: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))
    jax_qkvo: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))
    out_proj: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))
    context: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))


def recomputed_modules(sh: Shape, recompute: ArrayLike, recompute_modules: ArrayLike = 0) -> Recomputed:
    """The one rule for which modules selective recompute repeats, shared by the activation memory
    (cost.memory.activation_bytes_per_layer), the compute time (cost.compute.layer_compute_time) and the hardware
    FLOPs (:func:`training_flops`). ``recompute_modules`` holds bits of :data:`RECOMPUTE_MODULES`; 0 means
    :data:`DEFAULT_RECOMPUTE_MODULES` (Megatron-Core's default ``["core_attn"]``). Megatron-Core recomputes the
    core only when core_attn is named (attention.py ``checkpoint_core_attention``), MLA's up-projections when
    mla_up_proj is (multi_latent_attention.py ``recompute_up_proj``), the experts' activation when moe_act is
    (experts.py ``activation_recompute``), the whole MoE block when moe is (moe_layer.py ``moe_layer_recompute``:
    ``MoELayer.forward`` runs its ``custom_forward``, route -> dispatch -> experts -> combine -> postprocess with the
    shared experts, under ``tensor_parallel.checkpoint``, or ``te_checkpoint`` in an fp8 / fp4 run; NVIDIA/Megatron-LM
    @002255075c, the submodule of Megatron-Bridge 63b08b397, and the same at d98e8a64dd; not with
    ``cuda_graph_impl`` 'local', whose graphs recompute the layer themselves). moe_act named with moe is repeated
    once more: the activation's ``CheckpointWithoutOutput`` runs again inside the recomputed forward and discards
    its output again. layernorm: the norms :func:`recomputed_norms` finds separate modules. mlp: the dense MLP of a
    layer that is not an MoE layer (transformer_layer.py lines 537-539 at d98e8a64dd, ``if "mlp" in
    recompute_modules: if not self.is_moe_layer: self.recompute_mlp = True``; the forward, lines 992-1010, runs
    ``self.mlp`` under ``tensor_parallel.checkpoint``, ``te_checkpoint`` under fp8 / fp4, on the pre-MLP norm's
    output, which with the Transformer Engine spec is the residual stream itself: ``pre_mlp_layernorm`` is an
    IdentityOp and the norm lives in ``linear_fc1`` = TELayerNormColumnParallelLinear; the hybrid stack's MLPLayer
    is a TransformerLayer, megatron/core/ssm/mlp_layer.py line 13). shared_experts: the shared experts of an MoE
    layer (moe_layer.py lines 252-255 ``shared_experts_recompute``; ``shared_experts_compute``, lines 516-531, runs
    ``self.shared_experts`` under ``tensor_parallel.checkpoint`` / ``te_checkpoint`` unless
    ``moe_shared_expert_overlap``); named with moe they are repeated once more, their checkpoint running again
    inside the recomputed block. Megatron-Core has no parallel (GPT-J) block, whose attention and MLP share one norm
    output and one TP collective: mlp recomputes nothing there (its memory could not drop the shared input, while
    the repeated GEMMs, FLOPs and collective were priced), as layernorm (:func:`recomputed_norms`). jax_qkv:
    MaxText's ``save_qkv_proj`` (``save_only_these_names`` of query_proj, value_proj, key_proj, qkv_proj) or a
    ``custom`` / ``qkv_proj_offloaded`` policy that keeps or offloads those and leaves out_proj 'remat'
    (AI-Hypercomputer/maxtext@92e59fdf5 src/MaxText/layers/decoders.py ``get_remat_policy`` L319-332, base.yml
    ``out_proj: 'remat'``): everything jax_qkvo repeats (``jax_qkvo`` true) and the output projection
    (``out_proj``). jax_context (named beside jax_qkvo or jax_qkv; engine.job refuses it alone): a ``custom`` policy
    that also keeps ``context`` on the device: MaxText's attention op names the splash kernel's output and its
    residuals ``context`` (src/MaxText/layers/attention_op.py at maxtext-tutorial-v1.5.0 998b3e341:
    ``residual_checkpoint_name="context"`` passed to the kernel, ``checkpoint_name(output / lse, "context")``), so
    the backward reads the kernel's saved output and log-sum-exp instead of running its forward again: the policy's
    other repeats stay, the attention core is not recomputed (``attention_core`` false, ``context`` true)."""
    selective = recompute_code(recompute) == Recompute.SELECTIVE
    mods = np.asarray(recompute_modules, dtype=np.int64)
    mods = np.where(selective, np.where(mods == 0, DEFAULT_RECOMPUTE_MODULES, mods), 0)

    def on(*names: str) -> np.ndarray:
        return (mods & sum(RECOMPUTE_MODULES[n] for n in names)) > 0

    context = on("jax_context") & on("jax_qkvo", "jax_qkv")
    return Recomputed(attention_core=on("core_attn", "jax_dots") | (on("jax_qkvo", "jax_qkv") & ~context),
                      mla_up_proj=on("mla_up_proj") & sh.mla,
                      moe_act=on("moe_act"), jax_dots=on("jax_dots"), titan_op=on("titan_op"),
                      moe=on("moe") & (sh.moe_experts > 0), layernorm=on("layernorm"),
                      mlp=on("mlp") & ~np.asarray(sh.parallel_block, dtype=bool),
                      shared_experts=on("shared_experts") & (sh.moe_experts > 0) & (sh.moe_shared_experts > 0),
                      jax_qkvo=on("jax_qkvo", "jax_qkv"), out_proj=on("jax_qkv"), context=context)


def recomputed_norms(sh: Shape, layernorm: ArrayLike, *, attention: bool = True, mlp: bool = True,
                     moe: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(input norm, pre-MLP norm): whether selective recompute of ``layernorm`` (:attr:`Recomputed.layernorm`)
    repeats each of one layer's two norms (bool arrays).

    Megatron-Core (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/transformer_layer.py lines 475-530, the
    same at 002255075c lines 439-494): with "layernorm" in ``recompute_modules`` the layer sets
    ``recompute_input_layernorm`` when ``input_layernorm`` is not an ``IdentityOp`` and ``recompute_pre_mlp_layernorm``
    when ``pre_mlp_layernorm`` is not one; the norm then runs under ``tensor_parallel.CheckpointWithoutOutput``
    (``_run_input_layernorm`` line 714, ``_forward_pre_mlp_layernorm`` line 821), whose output storage is freed once
    the attention / MLP forward has read it (``discard_output_and_register_recompute``, lines 686, 1091) and
    refilled by the norm's forward before that block's backward. Which norms are modules of their own is the layer
    spec's choice (megatron/core/models/gpt/gpt_layer_specs.py, Transformer Engine spec): a standard attention's
    input norm is fused into ``linear_qkv`` = TELayerNormColumnParallelLinear (``input_layernorm`` left at its
    default IdentityOp), a dense MLP's into ``linear_fc1`` (``pre_mlp_layernorm=... if num_experts else IdentityOp``,
    lines 282, 313, 336), so neither is recomputed; an MoE layer's pre-MLP norm is a TENorm (same lines), and MLA's
    input norm is a TENorm unless ``mla_down_proj_fusion`` (default False, transformer_config.py line 3338; lines
    258-296). The hybrid stack (megatron/core/models/hybrid/hybrid_layer_specs.py): Mamba layers fuse their norm
    into the mixer's ``in_proj`` (TELayerNormColumnParallelLinear; MambaLayer reads no ``recompute_modules``), the
    attention and MLP layers are fused as above, the MoE layer (MoETransformerLayer) has ``pre_mlp_layernorm=TENorm``
    and the MLA / DSA layers ``input_layernorm=TENorm``. Megatron-Core has no parallel (GPT-J) block: False there.
    Not modelled: Megatron-Core's local (non-TE) spec, where both norms are separate, and the MoE router CUDA graph
    cases that switch the pre-MLP recompute off (lines 481-519)."""
    on = np.asarray(layernorm, dtype=bool) & ~np.asarray(sh.parallel_block, dtype=bool)
    inp = on & np.asarray(sh.mla, dtype=bool) if attention else np.zeros_like(on)
    pre = on if (mlp and moe) else np.zeros_like(on)
    return inp, pre


def titan_op_gemms(sh: Shape) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The weight GEMMs (name, input width, output width) whose forward torchtitan's op-level selective activation
    checkpointing repeats in the backward, for a dense block with separate Q, K, V projections (torchtitan's Llama).

    torchtitan ``--activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option op``
    (pytorch/torchtitan@e7c0cae torchtitan/models/llama3/parallelize_llama.py ``_apply_ac_to_transformer_block``;
    the same at 9dec370 torchtitan/parallelisms/parallelize_llama.py) wraps each TransformerBlock in
    ``checkpoint_wrapper`` with torch.utils.checkpoint ``create_selective_checkpoint_contexts``: an op in
    ``_save_list`` (aten.mm, SDPA flash / efficient, reduce_scatter_tensor, aten.max; 9dec370 also aten.abs) is
    MUST_SAVE "except every second mm" (a per-block ``mm_count``, counted from 1), every other op PREFER_RECOMPUTE.
    The block's mms run in the order wq, wk, wv, wo, w1, w3, w2 (model.py Attention.forward ``self.wq(x),
    self.wk(x), self.wv(x)`` ... ``self.wo(output)``; FeedForward ``self.w2(F.silu(self.w1(x)) * self.w3(x))``), so
    wq, wv, w1, w2 (counts 1, 3, 5, 7) are saved and the backward repeats wk and wo (2, 4) and, gated, w3 (6); an
    ungated MLP's second mm is the down-projection, whose output only feeds the residual sum, which the backward
    never reads: not repeated. torchao's Float8Linear (0afa4c1, eab345c: ``torch.mm`` on Float8Tensor arguments
    in ``matmul_with_hp_or_float8_args``) reaches the policy as aten.mm too (a TorchDispatchMode sees the op before
    the tensor subclass lowers it to ``torch._scaled_mm``), so fp8 runs save and repeat the same GEMMs;
    ``_scaled_mm`` has never been on torchtitan's save list (``git log -G _scaled_mm -- torchtitan`` to b5bcd76c6
    finds only documentation). Widths here are the unsplit ones (TP divides them like the rest)."""
    h, a, g, d, dv, f = sh.hidden, sh.heads, sh.kv_heads, sh.head_dim, sh.v_head_dim, sh.ffn_hidden
    return [("k", h, g * d), ("o", a * dv, h), ("up", h, np.where(sh.gated_mlp, f, 0.0))]


def titan_op_recompute_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs torchtitan's op policy repeats per layer and sequence: 2 s (h g d + a d_v h + h f [gated])
    (:func:`titan_op_gemms`); the attention core is saved, not repeated."""
    s = _arr("seq_len", seq_len)
    return 2.0 * s * sum(i * o for _, i, o in titan_op_gemms(sh))


def _arr(name: str, value: ArrayLike, *, minimum: float = 0.0, strict: bool = True) -> np.ndarray:
    """Float array, finite and > minimum (or >= minimum when not strict); InputError otherwise."""
    x = np.asarray(value, dtype=float)
    if not all_finite_above(x, minimum, strict):
        op = ">" if strict else ">="
        raise InputError(f"{name} has a value that is not finite or not {op} {minimum:g}", where=name,
                         allowed=f"finite values {op} {minimum:g}")
    return x


def _default(value: ArrayLike | None, fallback: np.ndarray) -> np.ndarray:
    """``value`` where given and > 0, else ``fallback`` (element-wise)."""
    if value is None:
        return fallback
    v = np.asarray(value, dtype=float)
    if not all_finite_nonnegative(v):
        raise InputError("a dimension is negative or not finite", where="shape",
                         allowed="finite values >= 0 (0 or null means the default)")
    return np.where(v > 0, v, fallback)


class Shape(msgspec.Struct, frozen=True, eq=False):  # numpy fields: == has no single truth value
    """A transformer shape resolved to float arrays (defaults applied). Build with :func:`shape`."""

    layers: np.ndarray
    hidden: np.ndarray
    heads: np.ndarray
    kv_heads: np.ndarray
    ffn_hidden: np.ndarray
    vocab: np.ndarray
    gated_mlp: np.ndarray  # bool
    tied_embeddings: np.ndarray  # bool
    biases: np.ndarray  # bool: linear biases (Megatron-Core add_bias_linear; GPT/BERT style)
    moe_experts: np.ndarray  # 0 = dense
    moe_top_k: np.ndarray
    moe_ffn_hidden: np.ndarray
    moe_shared_experts: np.ndarray
    moe_every: np.ndarray
    moe_first_dense: np.ndarray
    position_embeddings: np.ndarray  # learned positions (GPT/BERT), 0 for RoPE
    head_dim: np.ndarray  # d of Q and K; hidden / heads unless the model sets it (MLA: nope + rope)
    v_head_dim: np.ndarray  # d of V and the O-projection input; head_dim unless set (MLA)
    q_lora_rank: np.ndarray  # MLA low-rank query compression (0 = full-rank Q)
    kv_lora_rank: np.ndarray  # MLA latent KV width (0 = ordinary multi-head/GQA attention)
    qk_rope_head_dim: np.ndarray  # MLA decoupled RoPE key width shared by all heads
    parallel_block: np.ndarray  # bool: attention and MLP read the same input and are summed (GPT-J, PaLM)
    norms_per_layer: np.ndarray  # 2 pre-norms (or 1 shared norm in some parallel blocks)
    sliding_window: np.ndarray  # keys a query attends in a local layer (0 = global attention everywhere)
    sliding_window_pattern: np.ndarray  # every k-th layer global, the rest local (0 = all local)
    dropout: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(True))  # bool: dropout masks stored
    mtp_layers: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(0.0))  # multi-token prediction modules
    causal: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(True))  # bool: causal mask (decoder)
    # bool: the ungated MLP's activation is squared ReLU, relu(x)^2 (Nemotron-4), run as two eager ATen ops
    squared_relu: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))
    # LatentMoE width l of the routed experts (Megatron-Core moe_latent_size); 0 = off (experts at the hidden width)
    moe_latent: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(0.0))
    # bool: the mtp_layers modules are one module's weights run mtp_layers times (Megatron-Core mtp_use_repeated_layer)
    mtp_shared: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))
    # a hybrid's MTP block pattern ("*E" or "*-": an attention layer and an MoE / MLP layer); "" = none
    mtp_block: str = ""
    # a hybrid layer pattern (cost.mamba: one layer per character, M Mamba-2, * attention, - MLP, E MoE) and its
    # Mamba-2 widths; None = every layer is attention + MLP
    hybrid: LayerCounts | None = None
    mamba: MambaDims | None = None
    # the layers of one pipeline rank of a model whose MLP kind varies by position (not a hybrid pattern), "d" a
    # dense-MLP layer, "e" an MoE layer (:func:`layer_kinds`; engine.pipeline_ranks._part_job): every per-layer formula
    # then prices the rank's own kinds at their share of its layers (moe_layers = e's x layers / len); "" = the model's
    rank_kinds: str = ""
    # bool: RoPE rotates Q and K (every layer's memory-bound pass, compute.rope_rotated_elements); false with a learned
    # position table, ALiBi or no position encoding (:func:`shape`: position_embeddings 0 and rotary not false)
    rope: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(True))
    # bool: each norm carries a bias beside its gain (LayerNorm's beta: GPT/BERT); false for RMSNorm (Llama, GPT-OSS,
    # whose linears have biases all the same). :func:`shape` defaults it to ``biases`` and not ``gated_mlp``
    norm_biases: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(False))

    @property
    def attention_layers(self) -> np.ndarray:
        """Layers with self-attention: all, or a hybrid pattern's ``*`` layers."""
        return self.layers if self.hybrid is None else np.asarray(float(self.hybrid.attention)) + 0.0 * self.layers

    @property
    def mlp_layers(self) -> np.ndarray:
        """Layers with a dense MLP: :attr:`dense_layers`, or a hybrid pattern's ``-`` layers."""
        return self.dense_layers if self.hybrid is None else np.asarray(float(self.hybrid.mlp)) + 0.0 * self.layers

    @property
    def mamba_layers(self) -> np.ndarray:
        """Mamba-2 layers: a hybrid pattern's ``M`` layers (0 otherwise)."""
        return np.asarray(0.0 if self.hybrid is None else float(self.hybrid.mamba)) + 0.0 * self.layers

    @property
    def moe_layers(self) -> np.ndarray:
        """Number of layers whose MLP is an MoE block: every ``moe_every``-th after the dense prefix (a hybrid
        pattern's ``E`` layers). Computed once per shape (:func:`_moe_layers`; read-only, shared)."""
        return _moe_layers(self)

    def _moe_layers(self) -> np.ndarray:
        if self.hybrid is not None:
            return np.where(self.moe_experts > 0, float(self.hybrid.moe), 0.0)
        if self.rank_kinds:  # one pipeline rank's own layers, at their share of the model's layers
            share = self.rank_kinds.count("e") / len(self.rank_kinds)
            return np.where(self.moe_experts > 0, share * self.layers, 0.0)
        eligible = np.maximum(self.layers - self.moe_first_dense, 0)
        n = np.floor(eligible / self.moe_every)
        return np.where(self.moe_experts > 0, n, 0.0)

    @property
    def dense_layers(self) -> np.ndarray:
        return self.layers - self.moe_layers

    @property
    def last_layer_moe(self) -> np.ndarray:
        """True where the last layer is an MoE layer: with MoE layers at positions first_dense + j every
        (j = 1, 2, ...; the convention of :attr:`moe_layers`), where (L - first_dense) is a multiple of every."""
        if self.hybrid is not None:
            return (self.moe_experts > 0) & ((self.mtp_block or self.hybrid.last)[-1] == "E")
        eligible = self.layers - self.moe_first_dense
        return (self.moe_experts > 0) & (eligible > 0) & (np.mod(eligible, self.moe_every) == 0)

    @property
    def mtp_weight_modules(self) -> np.ndarray:
        """MTP modules with weights of their own: D, or 1 when the D modules run one module's weights
        (``mtp_shared``: Megatron-Core mtp_use_repeated_layer)."""
        return np.where(self.mtp_shared, np.minimum(self.mtp_layers, 1.0), self.mtp_layers)

    @property
    def mtp_block_norms(self) -> np.ndarray:
        """Pre-norms of an MTP block beyond a layer's ``norms_per_layer``: a hybrid's block of two layers (``*E``) has
        two, one more than the hybrid layer's one."""
        return np.asarray(1.0 if self.hybrid is not None else 0.0)

    @property
    def mtp_moe_layers(self) -> np.ndarray:
        """MTP blocks with an MoE MLP: all D when the last layer is MoE (Megatron-Core builds the MTP block from
        the last layer's spec; Megatron-LM's FLOP count adds ``last_layer_is_moe * mtp_num_layers`` MoE layers)."""
        return np.where(self.last_layer_moe, self.mtp_layers, 0.0)

    @property
    def moe_width(self) -> np.ndarray:
        """Width of the tokens the routed experts read and write, and that dispatch and combine carry: the LatentMoE
        width l (:attr:`moe_latent`), else the hidden width h."""
        return np.where(self.moe_latent > 0, self.moe_latent, self.hidden)

    @property
    def mla(self) -> np.ndarray:
        """True for multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def local_layer_fraction(self) -> np.ndarray:
        """Share of layers with sliding-window attention: all when the pattern is 0, else all but
        every ``sliding_window_pattern``-th (Gemma 2: 1 in 2 global, Gemma 3: 1 in 6)."""
        k = self.sliding_window_pattern
        globals_ = np.where(k > 0, np.floor(self.layers / np.maximum(k, 1.0)), 0.0)
        return np.where(self.sliding_window > 0, 1.0 - globals_ / self.layers, 0.0)

    def attended_keys(self, seq_len: ArrayLike) -> np.ndarray:
        """Keys one query attends, averaged over the layers: s, or min(s, w) in sliding-window layers.

        The full (not causal-halved) count, as for the s^2 term of the module docstring."""
        s = np.asarray(seq_len, dtype=float)
        local = self.local_layer_fraction
        return (1.0 - local) * s + local * self.local_window(s)

    def local_window(self, seq_len: ArrayLike) -> np.ndarray:
        """Keys a sliding-window layer holds: min(s, window) (s where no window is set)."""
        s = np.asarray(seq_len, dtype=float)
        return np.minimum(s, np.where(self.sliding_window > 0, self.sliding_window, s))

    def causal_keys(self, seq_len: ArrayLike) -> np.ndarray:
        """Keys one query attends under the causal mask, averaged over the queries and layers: query i (from 0)
        attends min(i + 1, w) keys (w = s in global layers, min(s, window) in local ones), so the mean is
        ``w - w (w - 1) / (2 s)``: (s + 1) / 2 in a global layer. These are the score entries a fused kernel
        computes, skipping the masked blocks (Dao 2023, FlashAttention-2, arXiv 2307.08691 §3.1.1; the
        FlashAttention benchmark halves the causal FLOP count, flash-attention benchmarks/
        benchmark_flash_attention.py ``flops``). A bidirectional model (``causal`` false) attends
        :meth:`attended_keys`."""
        s = np.asarray(seq_len, dtype=float)
        local = self.local_layer_fraction
        causal = (1.0 - local) * causal_mean_keys(s, s) + local * causal_mean_keys(s, self.local_window(s))
        return np.where(self.causal, causal, self.attended_keys(s))

    def window_blind_keys(self, seq_len: ArrayLike) -> np.ndarray:
        """Keys per query a fused kernel works through when it skips the blocks of the causal mask but not those
        outside a sliding window: (s + 1) / 2 in every layer of a causal model, global or local (s bidirectional).
        The cuDNN FP8 / MXFP8 SDPA backward on Blackwell does this (docs/model.md#fp8-attention,
        :func:`scalemodel.cost.compute.layer_compute_time` ``fp8_attention``); equals :meth:`causal_keys` without
        a window."""
        s = np.asarray(seq_len, dtype=float)
        return np.where(self.causal, causal_mean_keys(s, s) + 0.0 * self.sliding_window, s + 0.0 * self.causal)


def causal_mean_keys(seq_len: ArrayLike, window: ArrayLike) -> np.ndarray:
    """Mean keys per query of a causal mask over ``seq_len`` queries whose window holds ``window`` <= seq_len keys:
    query i (from 0) attends min(i + 1, w), so the sum is s w - w (w - 1) / 2 and the mean ``w - w (w - 1) / (2 s)``
    ((s + 1) / 2 for w = s)."""
    s = np.asarray(seq_len, dtype=float)
    w = np.asarray(window, dtype=float)
    return w - w * (w - 1.0) / (2.0 * s)


def shape(*, layers: ArrayLike, hidden: ArrayLike, heads: ArrayLike, vocab: ArrayLike,
          kv_heads: ArrayLike | None = None, ffn_hidden: ArrayLike | None = None,
          gated_mlp: ArrayLike = False, tied_embeddings: ArrayLike = True,
          biases: ArrayLike | None = None, norm_biases: ArrayLike | None = None, moe_experts: ArrayLike = 0,
          moe_top_k: ArrayLike = 0,
          moe_ffn_hidden: ArrayLike | None = None, moe_shared_experts: ArrayLike = 0,
          moe_every: ArrayLike = 1, moe_first_dense: ArrayLike = 0,
          position_embeddings: ArrayLike = 0, head_dim: ArrayLike | None = None,
          v_head_dim: ArrayLike | None = None, q_lora_rank: ArrayLike = 0, kv_lora_rank: ArrayLike = 0,
          qk_rope_head_dim: ArrayLike = 0, parallel_block: ArrayLike = False, norms_per_layer: ArrayLike = 2,
          sliding_window: ArrayLike = 0, sliding_window_pattern: ArrayLike = 0, dropout: ArrayLike = True,
          mtp_layers: ArrayLike = 0, causal: ArrayLike = True, squared_relu: ArrayLike = False,
          moe_latent: ArrayLike = 0, mtp_shared: ArrayLike = False, mtp_block: str = "",
          rotary: ArrayLike = True, hybrid: LayerCounts | None = None,
          mamba: MambaDims | None = None) -> Shape:
    """Validate a transformer shape and apply the defaults (g = a, d = h/a, f = 4h, f_e = f, biases = not gated,
    norm_biases = biases and not gated (GPT/BERT's LayerNorm beside linear biases; the gated-MLP families' RMSNorm,
    GPT-OSS's with linear biases too, has a gain only), d_v = d, RoPE unless ``rotary`` is false or a learned table is
    set). ``hybrid`` (:func:`scalemodel.cost.mamba.layer_counts`) makes each layer one block of its kind with one
    pre-norm (norms_per_layer 1); ``mamba`` gives the widths of its Mamba-2 layers."""
    L = _arr("layers", layers)
    h = _arr("hidden", hidden)
    a = _arr("heads", heads)
    V = _arr("vocab", vocab)
    g = _default(kv_heads, a)
    f = _default(ffn_hidden, 4.0 * h)
    gated = np.asarray(gated_mlp, dtype=bool)
    E = _arr("moe_experts", moe_experts, strict=False)
    k = _arr("moe_top_k", moe_top_k, strict=False)
    if np.any((E > 0) & ((k < 1) | (k > E))):
        raise InputError("MoE top_k is < 1 or more than the number of experts", where="moe.top_k",
                         allowed="1 <= top_k <= experts")
    latent = _arr("moe_latent", moe_latent, strict=False)
    if np.any((latent > 0) & ((latent >= h) | (E <= 0))):
        raise InputError("moe.latent_size is not below hidden, or set without experts", where="moe.latent_size",
                         allowed="0 < latent_size < hidden, with MoE experts")
    if np.any(g > a) or np.any(np.mod(a, g) != 0):
        raise InputError("kv_heads is more than heads or does not divide them", where="kv_heads",
                         allowed="a divisor of heads")
    d = _default(head_dim, h / a)
    kv_rank = _arr("kv_lora_rank", kv_lora_rank, strict=False)
    rope = _arr("qk_rope_head_dim", qk_rope_head_dim, strict=False)
    if np.any((kv_rank > 0) & (rope >= d)):
        raise InputError("MLA with qk_rope_head_dim >= head_dim", where="qk_rope_head_dim",
                         allowed="qk_rope_head_dim < head_dim (head_dim = qk_nope_head_dim + qk_rope_head_dim)")
    positions = _arr("position_embeddings", position_embeddings, strict=False)
    if hybrid is not None:
        _check_hybrid(hybrid, mamba, L, E, kv_rank, np.asarray(parallel_block, dtype=bool), mtp_layers, mtp_block)
        norms_per_layer = 1
    linear_biases = np.asarray(~gated if biases is None else biases, dtype=bool)
    return Shape(
        hybrid=hybrid, mamba=mamba if hybrid is not None else None,
        layers=L, hidden=h, heads=a, kv_heads=g, ffn_hidden=f, vocab=V, gated_mlp=gated,
        tied_embeddings=np.asarray(tied_embeddings, dtype=bool),
        biases=linear_biases,
        norm_biases=linear_biases & ~gated if norm_biases is None else np.asarray(norm_biases, dtype=bool),
        moe_experts=E, moe_top_k=k, moe_ffn_hidden=_default(moe_ffn_hidden, f),
        moe_shared_experts=_arr("moe_shared_experts", moe_shared_experts, strict=False),
        moe_every=_arr("moe_every", moe_every, minimum=1.0, strict=False),
        moe_first_dense=_arr("moe_first_dense", moe_first_dense, strict=False),
        position_embeddings=positions,
        rope=np.asarray(rotary, dtype=bool) & (positions == 0),
        head_dim=d,
        v_head_dim=_default(v_head_dim, d),
        q_lora_rank=_arr("q_lora_rank", q_lora_rank, strict=False),
        kv_lora_rank=kv_rank,
        qk_rope_head_dim=rope,
        parallel_block=np.asarray(parallel_block, dtype=bool),
        norms_per_layer=_arr("norms_per_layer", norms_per_layer, strict=False),
        sliding_window=_arr("sliding_window", sliding_window, strict=False),
        sliding_window_pattern=_arr("sliding_window_pattern", sliding_window_pattern, strict=False),
        dropout=np.asarray(dropout, dtype=bool),
        mtp_layers=_arr("mtp_layers", mtp_layers, strict=False),
        causal=np.asarray(causal, dtype=bool), squared_relu=np.asarray(squared_relu, dtype=bool),
        moe_latent=latent, mtp_shared=np.asarray(mtp_shared, dtype=bool), mtp_block=mtp_block if hybrid else "",
    )


def _check_hybrid(hybrid: LayerCounts, mamba: MambaDims | None, L: np.ndarray, E: np.ndarray, kv_rank: np.ndarray,
                  parallel: np.ndarray, mtp_layers: ArrayLike, mtp_block: str = "") -> None:
    """A hybrid pattern's layers must be ``layers``, its ``M`` need Mamba widths, its ``E`` MoE experts and MoE
    experts an ``E``; MLA, parallel blocks and MTP modules without their block pattern (``mtp_block`` "*E" or "*-")
    in a hybrid are not modelled."""
    if np.any(L != hybrid.layers):
        raise InputError(f"the hybrid pattern has {hybrid.layers} layers, layers says {L.max():g}",
                         where="hybrid.pattern", allowed="one character (M * - E) per layer, | not counted")
    if hybrid.mamba and mamba is None:
        raise InputError("the hybrid pattern has Mamba layers (M) but no Mamba widths", where="hybrid.mamba",
                         allowed="hybrid.mamba with state_dim, groups, head_dim (heads or expand)")
    if hybrid.moe and np.any(E <= 0):
        raise InputError("the hybrid pattern has MoE layers (E) but the model no experts", where="moe",
                         allowed="a moe block (experts, top_k) or no E in the pattern")
    if not hybrid.moe and np.any(E > 0):
        raise InputError("the model has MoE experts but its hybrid pattern no E layer", where="hybrid.pattern",
                         allowed="E for each MoE layer, or no moe block")
    for bad, where in ((np.any(kv_rank > 0), "mla"), (np.any(parallel), "parallel_block"),
                       (np.any(np.asarray(mtp_layers, dtype=float) > 0) and mtp_block not in ("*E", "*-"),
                        "mtp_layers")):
        if bad:
            raise InputError(f"{where} with a hybrid layer pattern is not modelled", where=where,
                             allowed="standard attention (*), sequential blocks, MTP modules with a *E or *- block")


# --- parameters -------------------------------------------------------------------------------


def attention_matrices(sh: Shape) -> list[tuple[str, np.ndarray, np.ndarray, bool]]:
    """The weight matrices of one attention block as (name, input width, output width, split by TP).

    Multi-head / grouped-query attention (Vaswani et al. 2017; Ainslie et al. 2023), fused QKV:
        qkv  h x (a d + 2 g d)          o  a d_v x h
    Multi-head latent attention (DeepSeek-AI 2024, arXiv:2405.04434 §2.1; the V3 report,
    arXiv:2412.19437 §2.1.1), with d = d_nope + d_rope for Q and K and r_q, r_kv the low ranks:
        q_down h x r_q, q_up r_q x a d (or q h x a d when r_q = 0)
        kv_down h x (r_kv + d_rope), kv_up r_kv x a (d_nope + d_v)       o  a d_v x h
    The down-projections are replicated across tensor-parallel ranks (Megatron-LM's MLA), the rest
    split.

    Computed once per shape (:func:`_attention_matrices`, keyed on the shape's identity as the frozen shape's
    arrays are fixed): a fresh list of shared, read-only arrays each call (evalspeed41: ~40 calls an evaluation).
    """
    return list(_attention_matrices(sh))


@lru_cache(maxsize=64)
def _attention_matrices(sh: Shape) -> tuple[tuple[str, np.ndarray, np.ndarray, bool], ...]:
    """:func:`attention_matrices`' matrices of ``sh`` (its identity: Shape has eq=False)."""
    h, a, g, d, dv = sh.hidden, sh.heads, sh.kv_heads, sh.head_dim, sh.v_head_dim
    mla = sh.mla
    zero = np.zeros_like(h)
    nope = d - sh.qk_rope_head_dim
    has_q_lora = sh.q_lora_rank > 0
    return tuple((name, _read_only(n_in), _read_only(n_out), split) for name, n_in, n_out, split in [
        # ordinary attention: one fused QKV matrix
        ("qkv", np.where(mla, zero, h), np.where(mla, zero, a * d + 2 * g * d), True),
        # MLA
        ("q_down", np.where(mla & has_q_lora, h, zero), np.where(mla & has_q_lora, sh.q_lora_rank, zero), False),
        ("q_up", np.where(mla, np.where(has_q_lora, sh.q_lora_rank, h), zero), np.where(mla, a * d, zero), True),
        ("kv_down", np.where(mla, h, zero), np.where(mla, sh.kv_lora_rank + sh.qk_rope_head_dim, zero), False),
        ("kv_up", np.where(mla, sh.kv_lora_rank, zero), np.where(mla, a * (nope + dv), zero), True),
        ("o", a * dv, h, True),
    ])


@lru_cache(maxsize=64)
def _moe_layers(sh: Shape) -> np.ndarray:
    """:attr:`Shape.moe_layers` of ``sh`` (its identity), computed once and read-only: ~50 reads an evaluation."""
    return _read_only(Shape._moe_layers(sh))  # type: ignore[no-any-return]


def _read_only(x: Any) -> Any:
    """``x`` (an array a cache shares between callers) as a read-only view, so a caller's in-place write fails
    loudly instead of changing another's value (the base, a shape's own field for some, stays as it was); a numpy
    scalar as it is (immutable)."""
    if not isinstance(x, np.ndarray):
        return x
    v = x.view()
    v.flags.writeable = False
    return v


def attention_params(sh: Shape) -> np.ndarray:
    """Attention weights (sum of :func:`attention_matrices`) + biases ((a + 2g) d + h, GPT style) +
    MLA's latent RMSNorm gains (r_q + r_kv)."""
    w = sum(i * o for _, i, o, _ in attention_matrices(sh))
    b = np.where(sh.biases & ~sh.mla, (sh.heads + 2 * sh.kv_heads) * sh.head_dim + sh.hidden, 0.0)
    latent_norms = np.where(sh.mla, sh.q_lora_rank + sh.kv_lora_rank, 0.0)
    return w + b + latent_norms


def linear_weight_parts(sh: Shape) -> dict[str, tuple[Any, Any]]:
    """Elements of one block's linear (``nn.Linear`` / TELinear) weight matrices, by module, as (split, whole): the
    part tensor parallelism splits over its ``tp`` ranks and the part every rank holds whole (one rank holds
    :func:`on_tp_rank` of them). The one statement of which linear is split, read by :func:`linear_weights_per_layer`,
    :func:`mtp_linear_weights`, the FP8-parameter count (``engine.dp_comm.fp8_param_linear_per_layer``) and the ZeRO-3
    gathered unit (``cost.memory.memory_per_gpu``):

        attention       the projections of :func:`attention_matrices`: qkv / q_up / kv_up / o split; MLA's
                        q_down h r_q and kv_down h (r_kv + d_rope) whole (Megatron-Core TELinear
                        ``parallel_mode='duplicated'``, multi_latent_attention.py L524-527, L572-574)
        mlp             a dense MLP's (3 if gated else 2) h f, split (column- then row-parallel)
        shared_experts  an MoE block's shared experts, (3 if gated else 2) h f_moe each, split
        moe_latent      LatentMoE's fc1_latent_proj and fc2_latent_proj, 2 h l, whole (``parallel_mode="duplicated"``,
                        moe/moe_layer.py L279-295)
        mamba_in_proj   a Mamba mixer's in_proj h x in_proj_width, column-parallel: split
        mamba_out_proj  its out_proj d_inner x h, row-parallel: split
        eh_proj         an MTP module's 2h x h, column-parallel: split (multi_token_prediction.py)

    at NVIDIA/Megatron-LM@d98e8a64dd. Not linears here: biases, norm gains, the router, the routed experts (grouped
    GEMMs)."""
    mats = np.where(sh.gated_mlp, 3.0, 2.0) * sh.hidden
    mat = attention_matrices(sh)
    md = sh.mamba
    zero = np.zeros_like(sh.hidden, dtype=float)
    return {
        "attention": (sum((i * o for _, i, o, split in mat if split), zero),
                      sum((i * o for _, i, o, split in mat if not split), zero)),
        "mlp": (mats * sh.ffn_hidden, zero),
        "shared_experts": (sh.moe_shared_experts * mats * sh.moe_ffn_hidden, zero),
        "moe_latent": (zero, 2.0 * sh.hidden * sh.moe_latent),
        "mamba_in_proj": (zero if md is None else md.hidden * md.in_proj_width, zero),
        "mamba_out_proj": (zero if md is None else md.d_inner * md.hidden, zero),
        "eh_proj": (2.0 * sh.hidden * sh.hidden, zero),
    }


def on_tp_rank(parts: tuple[Any, Any], tp: ArrayLike) -> np.ndarray:
    """Elements one of ``tp`` tensor-parallel ranks holds of a (split, whole) pair (:func:`linear_weight_parts`):
    split / tp + whole."""
    split, whole = parts
    return np.asarray(np.asarray(split, dtype=float) / np.asarray(tp, dtype=float) + whole, dtype=float)


def tensors_on_tp_rank(tensors: list[ParamTensor], tp: ArrayLike) -> np.ndarray:
    """Elements one of ``tp`` tensor-parallel ranks holds of parameter tensors (:func:`layer_param_tensors`):
    :func:`on_tp_rank` of (the ``split`` ones, the rest), n x elements each."""
    split = sum((p.n * p.elements for p in tensors if p.split), 0.0)
    whole = sum((p.n * p.elements for p in tensors if not p.split), 0.0)
    return on_tp_rank((split, whole), tp)


#: The modules of :func:`linear_weight_parts` in one layer of each kind (a hybrid's layer holds one block).
_LAYER_MODULES = {"attention_layers": ("attention",), "mlp_layers": ("mlp",),
                  "mamba_layers": ("mamba_in_proj", "mamba_out_proj"), "moe_layers": ("shared_experts", "moe_latent")}


def linear_weights_per_layer(sh: Shape, tp: ArrayLike = 1, modules: tuple[str, ...] | None = None) -> np.ndarray:
    """Elements of the weight matrices in a layer's linear (``nn.Linear``) modules, averaged over the layers, on one
    of ``tp`` tensor-parallel ranks (:func:`on_tp_rank` of :func:`linear_weight_parts`: the TP-split ones / tp, those
    every rank holds whole whole; ``tp`` 1, the default: the layer's whole count): the attention projections, the
    MLP's matrices, (3 if gated else 2) h f in a dense layer and per shared expert in an MoE layer (+ LatentMoE's two
    h x l projections, TELinear), a Mamba layer's in_proj and out_proj, each kind at its share of the layers.
    ``modules``: only those of :func:`linear_weight_parts` (default all). Not counted: biases, norm gains, the router
    and the routed experts (grouped GEMMs, not ``nn.Linear``). These are what torchao's Float8Linear casts to float8
    before FSDP's all-gather (``enable_fsdp_float8_all_gather``)."""
    parts = linear_weight_parts(sh)
    split, whole = 0.0, 0.0
    for kind, names in _LAYER_MODULES.items():
        n = getattr(sh, kind)
        for m in names:
            if modules is None or m in modules:
                split, whole = split + n * parts[m][0], whole + n * parts[m][1]
    L = np.maximum(sh.layers, 1)
    return on_tp_rank((split / L, whole / L), tp)


def linear_weights_whole_per_layer(sh: Shape) -> np.ndarray:
    """The part of :func:`linear_weights_per_layer` that every tensor-parallel rank holds whole, averaged over the
    layers: MLA's down-projections per attention layer and LatentMoE's 2 h l per MoE layer
    (:func:`linear_weight_parts`)."""
    parts = linear_weight_parts(sh)
    whole = sh.attention_layers * parts["attention"][1] + sh.moe_layers * parts["moe_latent"][1]
    return np.asarray(whole / np.maximum(sh.layers, 1), dtype=float)


def mtp_linear_weights(sh: Shape, tp: ArrayLike = 1) -> tuple[np.ndarray, np.ndarray]:
    """Elements of the linear weight matrices of one multi-token prediction module on one of ``tp`` tensor-parallel
    ranks (:func:`on_tp_rank` of :func:`linear_weight_parts`), as (block, eh_proj): its layer of the last layer's kind
    (the attention projections, and a dense MLP's (3 if gated else 2) h f or an MoE layer's shared experts and
    LatentMoE projections; a hybrid's MTP block is one attention + MLP / MoE layer) and ``eh_proj``, the 2h x h
    column-parallel linear (Megatron-Core multi_token_prediction.py, :func:`mtp_module_params`), apart: the weight
    workspace prices each at its own recipe. Not counted: the routed experts, norms, router, biases."""
    parts = linear_weight_parts(sh)
    moe = sh.last_layer_moe
    block = tuple(parts["attention"][k] + np.where(moe, parts["shared_experts"][k] + parts["moe_latent"][k],
                                                   parts["mlp"][k]) for k in (0, 1))
    return on_tp_rank(block, tp), on_tp_rank(parts["eh_proj"], tp)


def kv_elements_per_token(sh: Shape) -> np.ndarray:
    """Key and value elements per token as attention reads them (what context parallelism passes
    round its ring): 2 g d, or a (d + d_v) for MLA's up-projected heads."""
    return np.where(sh.mla, sh.heads * (sh.head_dim + sh.v_head_dim), 2.0 * sh.kv_heads * sh.head_dim)


def tp_allreduces_per_layer(sh: Shape) -> np.ndarray:
    """Tensor-parallel all-reduces per layer per pass: 2 (after attention and after the MLP), or 1
    when a parallel block sums both outputs before one reduction (GPT-NeoX ``gpt_j_residual``;
    PaLM, Chowdhery et al. 2022 §2), or in a hybrid pattern, whose layers hold one block each (a Mamba mixer's
    out_proj is row-parallel, one reduction like an attention block's)."""
    return np.where(sh.parallel_block | (sh.hybrid is not None), 1.0, 2.0)


def xla_head_side_gathers(sh: Shape) -> tuple[np.ndarray, ...]:
    """Elements a token of each head-side all-gather the later XLA SPMD partitioner (jaxlib 0.4.29 on) adds to an
    attention layer's backward at tensor > 1, by slot Q, K, V, O (0: none; docs/model.md#xlaver36). Each weight-gradient
    dot of a projection contracts the tokens between an operand sharded over 'tensor' on heads (dQ, dK, dV; the
    attention output ``o``, a v_d wide) and one sharded on embed (the norm output; the output gradient), and one of
    them is gathered: up to jaxlib 0.4.28 the h-wide one, from 0.4.29 the narrower one (xla/service/spmd/
    dot_handler.cc ``PartitionDot``, ``EvaluatePartitionCost``; measured on CPU GSPMD, docs/model.md#xlabwd36)::

        Q: a d  if a d < h        K: g d  if g d < h        V: g v_d  if g v_d < h        O: a v_d  if a v_d <= h

    The ties as measured (a d = h, jaxlib 0.4.37): Q's dot gathers the norm output, O's the attention output. A
    layer whose heads are wider than h gathers as before (measured: none added at a d = 1.5 h). MLA: 0 (its latent
    projections were not measured)."""
    h, a, g, d, dv = sh.hidden, sh.heads, sh.kv_heads, sh.head_dim, sh.v_head_dim
    plain = ~np.asarray(sh.mla, dtype=bool)
    q, k, v, o = a * d, g * d, g * dv, a * dv
    return tuple(np.asarray(np.where(plain & narrower, w, 0.0), dtype=float)
                 for w, narrower in ((q, q < h), (k, k < h), (v, v < h), (o, o <= h)))


def mla_down_proj_gathers(sh: Shape, mla_column_down_proj: ArrayLike = False) -> tuple[np.ndarray, ...]:
    """Elements a token of each all-gather an MLA attention block runs over the tensor-parallel group with sequence
    parallelism besides its up-projections' two (:func:`mla_up_proj_gathers`), one NCCL collective each (0: not run;
    all 0 without MLA); its reduce-scatter is the output projection's ``h`` in every case (docs/model.md#mla-tp).
    Four slots, the query side's input and latent, the KV side's input and latent (with the RoPE key):

        duplicated down-projections        0, 0, 0, d_rope
        column-parallel down-projections   h, r_q, h, r_kv + d_rope      (r_q = 0: 0, 0, h, r_kv + d_rope)

    with the up-projections' r_q (h where r_q = 0) and r_kv, [r_q = 0] h + r_q + r_kv + d_rope and 2 h + 2 r_q +
    2 r_kv + d_rope a block (an ordinary block gathers h once, the fused QKV's input). Duplicated (TELinear)
    down-projections (NVIDIA/Megatron-LM@720c8b40d8, 2025-07-29, core_v0.14.0, and later: e63aee46b2 of 2025-06-13
    was reverted the same day by f21a28b478; multi_latent_attention.py ``get_query_key_value_tensors``) run on the
    rank's s/t tokens, so besides the up-projections' inputs only the RoPE key is gathered
    (``gather_from_sequence_parallel_region(k_pos_emb)``, d_rope). Column-parallel down-projections
    (TEColumnParallelLinear from 1c425a8313, 2025-02-24, through core_v0.12.x and core_v0.13.x; gpt_layer_specs.py
    L117 / L123 at 7094270c6f, which NeMo 25.04 runs): each of the two gathers its h-wide input (a TE column linear
    with sequence parallelism gathers it inside the module; where r_q = 0 the query's is linear_q_proj's, the
    up-projection's own), then ``gather_from_tensor_model_parallel_region`` gathers each output whole (r_q,
    r_kv + d_rope) before ``scatter_to_sequence_parallel_region`` splits it again; multi_latent_attention.py
    L381-411 at 7094270c6f."""
    h = np.asarray(sh.hidden, dtype=float)
    q = np.asarray(sh.q_lora_rank, dtype=float)
    kv, rope = np.asarray(sh.kv_lora_rank, dtype=float), np.asarray(sh.qk_rope_head_dim, dtype=float)
    mla = np.asarray(sh.mla, dtype=bool)
    col = np.asarray(mla_column_down_proj, dtype=bool) & mla
    zero = np.zeros(1)
    return (np.where(col & (q > 0), h, zero), np.where(col, q, zero), np.where(col, h, zero),
            np.where(col, kv + rope, np.where(mla, rope, zero)))


def mla_up_proj_gathers(sh: Shape) -> tuple[np.ndarray, np.ndarray]:
    """Elements a token of the two all-gathers MLA's up-projections run over TP with sequence parallelism, the inputs
    of the Q (r_q, or h for the full-rank ``linear_q_proj``) and KV (r_kv) column linears: what selective recompute of
    ``mla_up_proj`` gathers again in the backward, as the checkpointed function (``qkv_up_proj_and_rope_apply``,
    multi_latent_attention.py at NVIDIA/Megatron-LM@7094270c6f and later) starts from the sequence-split latents.
    0 without MLA."""
    h, q = np.asarray(sh.hidden, dtype=float), np.asarray(sh.q_lora_rank, dtype=float)
    mla = np.asarray(sh.mla, dtype=bool)
    return np.where(mla, np.where(q > 0, q, h), 0.0), np.where(mla, np.asarray(sh.kv_lora_rank, dtype=float), 0.0)


def mlp_params(sh: Shape, width: ArrayLike | None = None) -> np.ndarray:
    """One MLP (or one expert) of width f: (3 if gated else 2)*h*f (+ biases (2 if gated else 1) f + h).
    A gated MLP's fc1 bias is 2f wide: Megatron-Core fuses gate and up in ``linear_fc1``, whose output (and bias,
    ``bias=add_bias_linear``) is ``ffn_hidden_size *= 2`` under ``gated_linear_unit`` (NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/transformer/mlp.py lines 205-225; bias31: it was counted f)."""
    f = sh.ffn_hidden if width is None else np.asarray(width, dtype=float)
    mats = np.where(sh.gated_mlp, 3.0, 2.0)
    return mats * sh.hidden * f + np.where(sh.biases, np.where(sh.gated_mlp, 2.0, 1.0) * f + sh.hidden, 0.0)


def norm_params(sh: Shape) -> np.ndarray:
    """Norms per layer (2, or 1 in a parallel block sharing its norm) x h (the gain) or 2h (+ the bias,
    ``norm_biases``: LayerNorm's beta; RMSNorm has none)."""
    return sh.norms_per_layer * np.where(sh.norm_biases, 2.0, 1.0) * sh.hidden


def embedding_params(sh: Shape) -> np.ndarray:
    """Word embeddings (x2 when untied) + learned positions + final norm."""
    word = sh.vocab * sh.hidden * np.where(sh.tied_embeddings, 1.0, 2.0)
    final_norm = np.where(sh.norm_biases, 2.0, 1.0) * sh.hidden
    return word + sh.position_embeddings * sh.hidden + final_norm


def expert_params(sh: Shape) -> np.ndarray:
    """One routed expert of width f_e on w-wide tokens (w = :attr:`Shape.moe_width`: h, or the LatentMoE width l):
    (3 if gated else 2) w f_e (+ biases (2 if gated else 1) f_e + w). Megatron-Core experts.py builds the experts'
    fc1 from ``moe_latent_size`` (else the hidden size) to (2 if gated else 1) f_e, its bias as wide
    (TEGroupedMLP: ``ffn_hidden_size *= 2`` under ``gated_linear_unit``, ``bias=add_bias_linear``, lines 214-223;
    SequentialMLP builds :func:`mlp_params`' MLP), and fc2 back (NVIDIA/Megatron-LM d98e8a64dd,
    megatron/core/transformer/moe/experts.py; bias31: the fc1 bias was counted f_e)."""
    w, f = sh.moe_width, sh.moe_ffn_hidden
    up = np.where(sh.gated_mlp, 2.0, 1.0)
    return np.where(sh.gated_mlp, 3.0, 2.0) * w * f + np.where(sh.biases, up * f + w, 0.0)


def router_params(sh: Shape) -> np.ndarray:
    """One MoE layer's router: the gate weight E h (+ its bias E with ``biases``, i.e. ``add_bias_linear``).
    Megatron-Core moe/router.py (NVIDIA/Megatron-LM@d98e8a64dd lines 64-72) builds ``weight`` (E, h) and, where
    ``config.add_bias_linear``, ``bias`` (E,), both whole on every TP rank; GPT-OSS sets add_bias_linear True and maps
    the Hugging Face ``mlp.router.bias`` to it (NVIDIA-NeMo/Megatron-Bridge@4ab94dfad
    src/megatron/bridge/models/gpt_oss/gpt_oss_bridge.py lines 62 and 171). bias31: the bias was not counted."""
    return sh.moe_experts * (sh.hidden + np.where(sh.biases, 1.0, 0.0))


def latent_projection_params(sh: Shape) -> np.ndarray:
    """The LatentMoE projections of one MoE layer: ``fc1_latent_proj`` h -> l and ``fc2_latent_proj`` l -> h, 2 h l
    (+ biases l + h with ``biases``: add_bias_linear); 0 without a latent width. Megatron-Core
    megatron/core/transformer/moe/moe_layer.py (NVIDIA/Megatron-LM d98e8a64dd) builds both as TELinear with
    ``parallel_mode="duplicated"``: every tensor-parallel rank holds them whole. The same 2 h l is Megatron-LM's
    ``latent_projection_params`` (megatron/training/theoretical_memory_usage.py, same commit)."""
    h, l = sh.hidden, sh.moe_latent
    return np.where(l > 0, 2.0 * h * l + np.where(sh.biases, l + h, 0.0), 0.0)


class TpWhole(NamedTuple):
    """Elements every tensor-parallel rank holds whole (``split`` false in :func:`layer_param_tensors` and
    :func:`non_layer_param_tensors`), by where they live: ``per_layer`` the layers' mean (norms, the router,
    row-parallel biases, MLA's down-projections and latent norms, LatentMoE's projections), ``position`` the learned
    position table (with the embedding), ``final_norm`` (with the output layer), ``mtp_module`` one multi-token
    prediction module's (its block's, as a layer of the last layer's kind, and its three norms)."""

    per_layer: np.ndarray
    position: np.ndarray
    final_norm: np.ndarray
    mtp_module: np.ndarray


def _whole(tensors: list[ParamTensor], like: np.ndarray) -> np.ndarray:
    """The elements of the tensors of ``tensors`` that tensor parallelism does not split (``like``'s shape)."""
    start = np.zeros(np.shape(like))
    return np.asarray(sum((np.where(t.split, 0.0, t.n * t.elements) for t in tensors), start), dtype=float)


def tp_whole_elements(sh: Shape) -> TpWhole:
    """The whole-per-TP-rank elements of :class:`TpWhole`, read off the tensors' ``split`` flags. Megatron-Core
    (NVIDIA/Megatron-LM@d98e8a64dd) gives every TP rank these weights at full size: the norms (TENorm, the norm inside
    TELayerNormColumnParallelLinear, extensions/transformer_engine.py), the router (moe/router.py
    ``torch.empty((num_moe_experts, hidden_size))``), a RowParallelLinear's bias (tensor_parallel/layers.py
    ``torch.empty(self.output_size)``), MLA's down-projections (multi_latent_attention.py ``parallel_mode =
    'duplicated'``), LatentMoE's projections (moe_layer.py, duplicated) and the learned position table
    (a plain ``torch.nn.Embedding``, models/common/embeddings/language_model_embedding.py).

    Remembered per shape object (a frozen Shape; its arrays read-only), as the step model asks for it once per stage
    and per pipeline rank of a hybrid pattern (engine.pipeline_ranks._part_job) for the same few shapes."""
    hit = _WHOLE_MEMO.get(id(sh))
    if hit is not None and hit[0] is sh:
        return hit[1]
    h = sh.hidden
    out = TpWhole(per_layer=_whole(layer_param_tensors(sh), h), position=_whole(_position_tensors(sh), h),
                  final_norm=_whole(_final_norm_tensors(sh), h), mtp_module=_whole(_mtp_module_tensors(sh), h))
    for a in out:
        a.setflags(write=False)
    if len(_WHOLE_MEMO) >= 64:
        _WHOLE_MEMO.clear()
    _WHOLE_MEMO[id(sh)] = (sh, out)  # the shape held: its id stays its own while remembered
    return out


#: :func:`tp_whole_elements` of the shapes last asked for: {id(shape): (shape, its elements)}
_WHOLE_MEMO: dict[int, tuple[Shape, TpWhole]] = {}


def tp_replicated_elements(sh: Shape) -> tuple[np.ndarray, np.ndarray]:
    """Elements of the tensors every tensor-parallel rank holds whole (:func:`tp_whole_elements`): (per layer, the
    layers' mean; outside the layers, the MTP modules with weights included)."""
    w = tp_whole_elements(sh)
    return w.per_layer, w.position + w.final_norm + sh.mtp_weight_modules * w.mtp_module


def expert_params_per_layer(sh: Shape) -> np.ndarray:
    """Routed experts of one MoE layer (what expert parallelism shards): E * :func:`expert_params`."""
    return sh.moe_experts * expert_params(sh)


def layer_params(sh: Shape, moe: bool = False, active: bool = False) -> np.ndarray:
    """Parameters of one layer: dense, or MoE (all experts, or the k routed + shared when ``active``)."""
    base = attention_params(sh) + norm_params(sh)
    if not moe:
        return base + mlp_params(sh)
    n_routed = sh.moe_top_k if active else sh.moe_experts
    experts = n_routed * expert_params(sh) + sh.moe_shared_experts * mlp_params(sh, sh.moe_ffn_hidden)
    return base + experts + router_params(sh) + latent_projection_params(sh)


def mamba_params(sh: Shape) -> np.ndarray:
    """One Mamba-2 mixer's parameters (:func:`scalemodel.cost.mamba.mamba_mixer_params`; 0 without Mamba layers)."""
    return np.asarray(0.0) if sh.mamba is None else mamba_mixer_params(sh.mamba)


def _layers_params(sh: Shape, active: bool) -> np.ndarray:
    """Parameters of all layers by kind: attention_layers x attention + layers x norms + mlp_layers x MLP +
    moe_layers x (experts, all or k routed, + shared + router + latent projections) + mamba_layers x mixer. Without a
    hybrid pattern this is dense_layers x :func:`layer_params` + moe_layers x :func:`layer_params` (moe)."""
    n_routed = sh.moe_top_k if active else sh.moe_experts
    moe = (n_routed * expert_params(sh) + sh.moe_shared_experts * mlp_params(sh, sh.moe_ffn_hidden)
           + router_params(sh) + latent_projection_params(sh))
    return (sh.attention_layers * attention_params(sh) + sh.layers * norm_params(sh) + sh.mlp_layers * mlp_params(sh)
            + sh.moe_layers * moe + sh.mamba_layers * mamba_params(sh))


def param_count(sh: Shape) -> np.ndarray:
    """Total parameters (all experts counted), each layer's kinds as :func:`_layers_params` counts them."""
    return _layers_params(sh, active=False) + embedding_params(sh)


def mtp_module_params(sh: Shape) -> np.ndarray:
    """Parameters of one multi-token prediction module (module docstring): a layer of the last layer's kind
    (:func:`layer_params`), the 2h x h projection eh_proj (no bias: Megatron-Core builds it with bias=False) and
    three norms (enorm, hnorm, the module's final norm: h each, 2h with ``norm_biases``). The embedding and
    the output head are the main model's (shared)."""
    block = np.where(sh.last_layer_moe, layer_params(sh, moe=True), layer_params(sh))
    norms = (3.0 + sh.mtp_block_norms) * np.where(sh.norm_biases, 2.0, 1.0) * sh.hidden
    return block + 2.0 * sh.hidden * sh.hidden + norms


def mtp_params(sh: Shape) -> np.ndarray:
    """Parameters of the D multi-token prediction modules (0 without them; one module's with ``mtp_shared``)."""
    return sh.mtp_weight_modules * mtp_module_params(sh)


class ParamTensor(NamedTuple):
    """One kind of parameter tensor: ``n`` of them (per layer, averaged over the layers, for a layer's tensors),
    ``elements`` each before tensor parallelism, ``split`` whether tensor parallelism divides it (else each rank
    holds it whole)."""

    n: np.ndarray
    elements: np.ndarray
    split: bool


def layer_param_tensors(sh: Shape, moe: ArrayLike | None = None) -> list[ParamTensor]:
    """A layer's parameter tensors outside the routed experts, averaged over the layers (``moe`` None; True: an MoE
    layer's, False: a dense layer's), in Megatron-Core's module
    layout (the one :func:`attention_matrices` describes: one fused QKV matrix; a gated MLP's gate and up projections
    fused in ``linear_fc1``, megatron/core/transformer/mlp.py); their elements add up to :func:`layer_params` (less
    the routed experts):

        attention   each non-empty matrix of :func:`attention_matrices` (MHA/GQA: qkv, proj; MLA: q_down when
                    r_q > 0, q_up, kv_down, kv_up, proj), MLA's latent norms (q when r_q > 0, kv), with ``biases``
                    (not MLA) the qkv bias ((a + 2g) d, split) and the proj bias (h, whole)
        norms       norms_per_layer x (weight h, + bias h with ``norm_biases``), whole
        dense MLP   fc1 ((2 if gated else 1) f h), fc2 (f h), split; with ``biases`` fc1's ((2 if gated else 1) f,
                    split: mlp.py's fused gate+up output) and fc2's (h, whole)
        MoE layer   the router (E h, + its bias E with ``biases``, whole: :func:`router_params`); the shared
                    experts' fc1 and fc2 (one MLP of width S f_e), split;
                    LatentMoE's fc1_latent_proj (h l) and fc2_latent_proj (l h), whole (duplicated), + biases l, h
        Mamba layer (hybrid) :func:`scalemodel.cost.mamba.mamba_param_tensors`, split; attention, MLP and Mamba
                    tensors then count at their kind's share of the layers

    What the step model needs from them (:func:`scalemodel.engine.dp_comm.bucket_count`) is that data-parallel
    frameworks fill gradient buckets with whole tensors."""
    h, a, g, d = sh.hidden, sh.heads, sh.kv_heads, sh.head_dim
    layers = np.maximum(sh.layers, 1.0)
    one = np.ones_like(h) * (sh.attention_layers / layers if moe is None else 1.0)  # attention's share of the layers
    out = [ParamTensor(np.where(i * o > 0, one, 0.0), i * o, split) for _, i, o, split in attention_matrices(sh)]
    out += [ParamTensor(np.where(sh.mla & (sh.q_lora_rank > 0), one, 0.0), sh.q_lora_rank, False),
            ParamTensor(np.where(sh.mla, one, 0.0), sh.kv_lora_rank, False)]
    if sh.mamba is not None and moe is None:
        out += [ParamTensor(sh.mamba_layers / layers, n, split) for n, split in mamba_param_tensors(sh.mamba)]
    bias = np.where(sh.biases & ~sh.mla, one, 0.0)
    out += [ParamTensor(bias, (a + 2 * g) * d, True), ParamTensor(bias, h, False)]
    out += [ParamTensor(sh.norms_per_layer, h, False),
            ParamTensor(sh.norms_per_layer * np.where(sh.norm_biases, 1.0, 0.0), h, False)]
    if moe is None:
        dense, moe = sh.mlp_layers / layers, sh.moe_layers / layers
    else:
        moe = np.where(moe, 1.0, 0.0) + 0.0 * h
        dense = 1.0 - moe
    up = np.where(sh.gated_mlp, 2.0, 1.0)
    f = sh.ffn_hidden
    out += [ParamTensor(dense, up * f * h, True), ParamTensor(dense, f * h, True),
            ParamTensor(dense * np.where(sh.biases, 1.0, 0.0), up * f, True),
            ParamTensor(dense * np.where(sh.biases, 1.0, 0.0), h, False)]
    shared = np.where(sh.moe_shared_experts > 0, moe, 0.0)
    fs = sh.moe_shared_experts * sh.moe_ffn_hidden
    out += [ParamTensor(moe, sh.moe_experts * h, False), ParamTensor(moe * np.where(sh.biases, 1.0, 0.0),
                                                                     sh.moe_experts, False),
            ParamTensor(shared, up * fs * h, True),
            ParamTensor(shared, fs * h, True), ParamTensor(shared * np.where(sh.biases, 1.0, 0.0), up * fs, True),
            ParamTensor(shared * np.where(sh.biases, 1.0, 0.0), h, False)]
    lat = np.where(sh.moe_latent > 0, moe, 0.0)
    lat_b = lat * np.where(sh.biases, 1.0, 0.0)
    out += [ParamTensor(2.0 * lat, h * sh.moe_latent, False), ParamTensor(lat_b, sh.moe_latent, False),
            ParamTensor(lat_b, h, False)]
    return out


def expert_param_tensors(sh: Shape) -> list[ParamTensor]:
    """One routed expert's parameter tensors: fc1 and fc2 (split by the expert tensor parallelism), + their biases
    (fc1's (2 if gated else 1) f_e, split; fc2's w, whole: :func:`expert_params`).
    Transformer Engine's GroupedLinear (Megatron-Core TEGroupedMLP) registers one ``weight{i}`` per local expert, as
    SequentialMLP holds one MLP per expert (the legacy GroupedMLP stacks them in two tensors). The experts' width is
    :attr:`Shape.moe_width` (the LatentMoE width l when set)."""
    h, f = sh.moe_width, sh.moe_ffn_hidden
    b = np.where(sh.biases, 1.0, 0.0) + 0.0 * h
    one = np.ones_like(h)
    return [ParamTensor(one, np.where(sh.gated_mlp, 2.0, 1.0) * f * h, True), ParamTensor(one, f * h, True),
            ParamTensor(b, np.where(sh.gated_mlp, 2.0, 1.0) * f, True), ParamTensor(b, h, False)]


def non_layer_param_tensors(sh: Shape) -> list[ParamTensor]:
    """Parameter tensors outside the layers: the word embedding and (untied) the output layer (V h, vocab-parallel),
    the learned position table, the final norm (weight, + bias); per multi-token prediction module the tensors of a
    layer of the last layer's kind (its routed experts apart), eh_proj (2h x h, split) and three norms
    (:func:`mtp_module_params`)."""
    part = non_layer_tensor_parts(sh)
    untied = np.where(sh.tied_embeddings, 0.0, 1.0)
    mtp = sh.mtp_weight_modules
    return (part["word"] + [ParamTensor(untied * t.n, t.elements, t.split) for t in part["word"]]
            + part["positions"] + part["final_norm"]
            + [ParamTensor(mtp * t.n, t.elements, t.split) for t in part["mtp"]])


def non_layer_tensor_parts(sh: Shape) -> dict[str, list[ParamTensor]]:
    """The tensors outside the layers by where a pipeline places them (:func:`non_layer_param_tensors`, whole model):
    ``word`` one V h word table (the embedding; the output layer is another such), ``positions`` the learned
    position table (rank 0), ``final_norm`` (the last rank), ``mtp`` ONE multi-token prediction module's tensors
    (the last rank holds ``mtp_weight_modules`` of them)."""
    return {"word": [ParamTensor(np.ones_like(sh.hidden), sh.vocab * sh.hidden, True)],
            "positions": _position_tensors(sh), "final_norm": _final_norm_tensors(sh), "mtp": _mtp_module_tensors(sh)}


def _position_tensors(sh: Shape) -> list[ParamTensor]:
    """The learned position table (P x h, a plain ``torch.nn.Embedding``: whole on every TP rank), none without."""
    return [ParamTensor(np.where(sh.position_embeddings > 0, 1.0, 0.0), sh.position_embeddings * sh.hidden, False)]


def _final_norm_tensors(sh: Shape) -> list[ParamTensor]:
    """The final norm's weight (h) and, with ``norm_biases``, its bias (h); whole on every TP rank."""
    h = sh.hidden
    return [ParamTensor(np.ones_like(h), h, False), ParamTensor(np.where(sh.norm_biases, 1.0, 0.0), h, False)]


def _mtp_module_tensors(sh: Shape) -> list[ParamTensor]:
    """One multi-token prediction module's tensors (:func:`mtp_module_params`): a layer of the last layer's kind (its
    routed experts apart), eh_proj (2h x h, split) and 3 + ``mtp_block_norms`` norms (weight, + bias)."""
    h = sh.hidden
    b = np.where(sh.norm_biases, 1.0, 0.0)
    nn = 3.0 + sh.mtp_block_norms
    return layer_param_tensors(sh, moe=sh.last_layer_moe) + [
        ParamTensor(np.ones_like(h), 2.0 * h * h, True), ParamTensor(nn, h, False), ParamTensor(nn * b, h, False)]


def layer_kinds(sh: Shape) -> str:
    """Each decoder layer's MLP kind in order, "d" dense or "e" MoE, of a model that is not a hybrid pattern: the MoE
    layers at 1-based positions F + j e (j = 1 .. n; F ``moe_first_dense``, e ``moe_every``, n :attr:`Shape.moe_layers`;
    DeepSeek-V3 F 3, e 1: layers 0-2 dense, 3-60 MoE, as its first_k_dense_replace = 3 builds them). At e > 1 this is
    Hugging Face's Qwen2-MoE decoder_sparse_step / Llama 4 interleave_moe_layer_step placement (0-based e-1, 2e-1, ...),
    not Megatron-Core's integer moe_layer_freq (``i % moe_layer_freq == 0``: 0, e, 2e, ...; gpt_layer_specs.py
    L647-650 at NVIDIA/Megatron-LM@d98e8a64dd). "" for a hybrid pattern (its own string) or a model without MoE
    layers."""
    if sh.hybrid is not None or float(sh.moe_layers) <= 0:
        return ""
    L, F, e, n = (int(float(x)) for x in (sh.layers, sh.moe_first_dense, sh.moe_every, sh.moe_layers))
    moe = {F + j * e - 1 for j in range(1, n + 1)}
    return "".join("e" if i in moe else "d" for i in range(L))


def kind_intervals(kinds: str) -> tuple[tuple[int, int], ...]:
    """The intervals of a :func:`layer_kinds` string from each MoE layer to the next, read cyclically (the layers
    after the last and before the first form one interval): ((dense layers between), count), sorted; one per MoE
    layer. "ddeede" -> e at 2, 3, 5: 0, 1 and (cyclically) 2 dense layers follow them: ((0, 1), (1, 1), (2, 1))."""
    pos = [i for i, c in enumerate(kinds) if c == "e"]
    found: dict[int, int] = {}
    for j, i in enumerate(pos):
        nxt = pos[(j + 1) % len(pos)]
        gap = (nxt - i - 1) if nxt > i else (len(kinds) - i - 1 + nxt)
        found[gap] = found.get(gap, 0) + 1
    return tuple(sorted(found.items()))


def tensor_count(tensors: list[ParamTensor]) -> np.ndarray:
    """The number of tensors in a list of :class:`ParamTensor` kinds."""
    return np.asarray(sum(t.n for t in tensors), dtype=float)


def training_param_count(sh: Shape) -> np.ndarray:
    """Parameters trained: :func:`param_count` (the main model, as published) + :func:`mtp_params`."""
    return param_count(sh) + mtp_params(sh)


def active_param_count(sh: Shape) -> np.ndarray:
    """Parameters a token passes through: dense layers + MoE layers with k routed + shared experts.

    Embeddings are counted (both matrices when untied), as DeepSeek and Mistral count "active".
    """
    return _layers_params(sh, active=True) + embedding_params(sh)


# --- FLOPs ------------------------------------------------------------------------------------


def attention_core_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of Q K^T and softmax . V for one sequence, one layer (mean over layers):
    2 s k a (d + d_v) with k the attended keys (s, or the window w in sliding-window layers);
    4 s^2 a d for ordinary attention."""
    s = _arr("seq_len", seq_len)
    return 2.0 * s * sh.attended_keys(s) * sh.heads * (sh.head_dim + sh.v_head_dim)


def attention_gemm_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of one attention block's weight GEMMs for one sequence: 2 s (attention matrix params)."""
    return 2.0 * _arr("seq_len", seq_len) * sum(i * o for _, i, o, _ in attention_matrices(sh))


def mlp_gemm_flops(sh: Shape, seq_len: ArrayLike, moe: bool = False) -> np.ndarray:
    """Forward FLOPs of one MLP block's GEMMs for one sequence: 2 s (3|2) h f, or (MoE) 2 s ((k + shared) (3|2) h
    f_e + h E) with the router; LatentMoE: 2 s (k (3|2) l f_e + shared (3|2) h f_e + h E + 2 h l), the routed
    experts at the latent width l and the two latent projections (Megatron-LM megatron/training/training.py
    ``moe_layer_flops``, NVIDIA/Megatron-LM d98e8a64dd: routed 4 T l f_e k, + 4 T h l for the up and down
    projections)."""
    s = _arr("seq_len", seq_len)
    mats = np.where(sh.gated_mlp, 3.0, 2.0)
    if moe:
        return 2.0 * s * (sh.moe_top_k * mats * sh.moe_width * sh.moe_ffn_hidden
                          + sh.moe_shared_experts * mats * sh.hidden * sh.moe_ffn_hidden
                          + sh.hidden * sh.moe_experts + 2.0 * sh.hidden * sh.moe_latent)
    return 2.0 * s * mats * sh.hidden * sh.ffn_hidden


def mlp_up_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of a dense MLP block's up-projection GEMMs for one sequence: 2 s (2|1) h f (gated: wi_0, wi_1).
    What ``jax_qkvo`` repeats beyond the attention core: MaxText's ``save_dot_except_mlp`` /
    ``save_dot_except_mlpwi`` (AI-Hypercomputer/maxtext@9551c2ade MaxText/layers/models.py lines 314-330, the same
    dense path since fc0b59bb6) are ``jax.checkpoint_policies.save_only_these_names`` of query_proj, key_proj,
    value_proj (attentions.py lines 1279-1281, after RoPE), qkv_proj, out_proj (line 1315) and, the second, mlpwo
    (linears.py line 288); ``remat_policy=custom`` with those names 'device' and decoder_layer_input (the layer
    input, llama2.py line 82) saves the same set (pyconfig.py validate_and_assign_remat_tensors, lines 199-225). The
    backward then reads the saved Q, K, V, the output projection (to rebuild the residual sum the pre-MLP norm
    reads) and the layer input, and re-runs the norms, the attention core (its output, ``context``, is not saved),
    the up-projections wi_0 and wi_1 (mlpwi_0 / mlpwi_1 not saved) and the activation; the down-projection's output
    feeds only the residual sum, which no backward reads, so mlpwo is no residual and the two policies keep the same
    tensors (checked with ``jax.ad_checkpoint.print_saved_residuals`` on that layer's structure, jax 0.4.37: x, Q,
    K, V and out_proj saved under all four, and two more forward-shaped dot_generals in the backward than under
    ``checkpoint_dots_with_no_batch_dims``: wi_0, wi_1)."""
    s = _arr("seq_len", seq_len)
    return 2.0 * s * np.where(sh.gated_mlp, 2.0, 1.0) * sh.hidden * sh.ffn_hidden


def out_proj_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of the attention output projection GEMM for one sequence: 2 s (a d_v) h. What ``jax_qkv``
    repeats beyond ``jax_qkvo``: its policies keep query_proj, key_proj and value_proj but not ``out_proj``, which
    MaxText names on ``out_projection``'s output (AI-Hypercomputer/maxtext@92e59fdf5 src/MaxText/layers/attentions.py
    L953, ``h`` wide), so the backward rebuilds the residual sum the pre-MLP norm reads by running that GEMM again on
    the recomputed attention output (``context``, 'remat' too)."""
    s = _arr("seq_len", seq_len)
    return 2.0 * s * sh.heads * sh.v_head_dim * sh.hidden


def layer_gemm_flops(sh: Shape, seq_len: ArrayLike, moe: bool = False) -> np.ndarray:
    """Forward FLOPs of the weight GEMMs of one attention + MLP layer for one sequence: 2 * s * (matrix params
    used)."""
    return attention_gemm_flops(sh, seq_len) + mlp_gemm_flops(sh, seq_len, moe=moe)


def down_projection_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of the MLP down-projections of all layers for one sequence: 2 s h f per dense layer,
    2 s f_e (k w + shared h) per MoE layer, w the routed experts' width (:attr:`Shape.moe_width`) (the GEMMs XLA's
    remat does not repeat; compute.layer_compute_time)."""
    s = _arr("seq_len", seq_len)
    return 2.0 * s * (sh.hidden * sh.mlp_layers * sh.ffn_hidden
                      + sh.moe_layers * (sh.moe_top_k * sh.moe_width + sh.moe_shared_experts * sh.hidden)
                      * sh.moe_ffn_hidden)


def xla_remat_dead_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of all layers for one sequence that XLA's full remat leaves out of the recomputed forward
    (compute.layer_compute_time ``xla_remat``): the down-projections (:func:`down_projection_flops`) and, in a
    parallel block, the attention output projections, 2 s (a d_v) h per attention layer, whose outputs feed only
    the layer's output sum (docs/model.md#xlapar35)."""
    s = _arr("seq_len", seq_len)
    o_proj = 2.0 * s * sh.attention_layers * sh.heads * sh.v_head_dim * sh.hidden
    return down_projection_flops(sh, s) + np.where(np.asarray(sh.parallel_block, dtype=bool), o_proj, 0.0)


def mla_up_projection_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of MLA's Q and KV up-projection GEMMs (``q_up``, ``kv_up`` of :func:`attention_matrices`) of one
    layer for one sequence: 2 s (r_q a d + r_kv a (d_nope + d_v)) (r_q -> h without a Q low rank); 0 without MLA."""
    s = _arr("seq_len", seq_len)
    return 2.0 * s * sum(i * o for name, i, o, _ in attention_matrices(sh) if name in ("q_up", "kv_up"))


def logits_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of the output projection for one sequence: 2 * s * h * V."""
    return 2.0 * _arr("seq_len", seq_len) * sh.hidden * sh.vocab


def mtp_projection_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of one MTP module's eh_proj for one sequence: 2 * s * (2h) * h."""
    return 2.0 * _arr("seq_len", seq_len) * 2.0 * sh.hidden * sh.hidden


def mtp_block_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of one MTP module's transformer block for one sequence: a layer of the last layer's kind
    (:func:`layer_gemm_flops`) + the attention core (:func:`attention_core_flops`)."""
    gemm = np.where(sh.last_layer_moe, layer_gemm_flops(sh, seq_len, moe=True), layer_gemm_flops(sh, seq_len))
    return gemm + attention_core_flops(sh, seq_len)


def mtp_forward_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of the D MTP modules for one sequence: D (block + eh_proj + shared-head logits)."""
    return sh.mtp_layers * (mtp_block_flops(sh, seq_len) + mtp_projection_flops(sh, seq_len)
                            + logits_flops(sh, seq_len))


def mamba_layer_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of one Mamba-2 layer for one sequence (:func:`scalemodel.cost.mamba.mamba_forward_flops`:
    projections, conv1d, SSD chunk matmuls); 0 without Mamba layers."""
    s = _arr("seq_len", seq_len)
    return 0.0 * s if sh.mamba is None else mamba_forward_flops(sh.mamba, s)


def forward_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs for one sequence: all layers by kind (attention GEMMs + core, dense MLP, MoE, Mamba-2) +
    logits + the MTP modules."""
    layers = (sh.attention_layers * (attention_gemm_flops(sh, seq_len) + attention_core_flops(sh, seq_len))
              + sh.mlp_layers * mlp_gemm_flops(sh, seq_len) + sh.moe_layers * mlp_gemm_flops(sh, seq_len, moe=True)
              + sh.mamba_layers * mamba_layer_flops(sh, seq_len))
    return layers + logits_flops(sh, seq_len) + mtp_forward_flops(sh, seq_len)


class StepFlops(msgspec.Struct, frozen=True, eq=False):  # numpy fields: == has no single truth value
    """FLOPs of one training step (arrays). ``model`` is for MFU, ``hardware`` (with recompute) for HFU."""

    forward: np.ndarray
    model: np.ndarray
    hardware: np.ndarray
    recompute: np.ndarray


def training_flops(sh: Shape, seq_len: ArrayLike, sequences: ArrayLike,
                   recompute: ArrayLike = "none", recompute_modules: ArrayLike = 0) -> StepFlops:
    """Training FLOPs for ``sequences`` sequences of length ``seq_len`` (a global batch).

    model    = 3 * forward                               (forward + backward = 2 x forward)
    hardware = model + recompute, where recompute is the layers' forward (full), or (selective) per layer
               what :func:`recomputed_modules` says is repeated: the attention core 2 s k a (d + d_v) (core_attn,
               jax_dots), MLA's up-projection GEMMs :func:`mla_up_projection_flops` (mla_up_proj), the GEMMs
               torchtitan's op policy repeats :func:`titan_op_recompute_flops` (titan_op), the MoE block's GEMMs
               :func:`mlp_gemm_flops` (moe: router, routed and shared experts, LatentMoE's projections) in each
               MoE layer and MoE MTP block, the dense MLP's GEMMs :func:`mlp_gemm_flops` (mlp) in each dense MLP
               layer (:attr:`Shape.mlp_layers`) and dense MTP block, the shared experts' GEMMs 2 s c (3|2) h f_e
               (shared_experts) in each MoE layer and MoE MTP block, the attention core and the dense MLP's
               up-projections :func:`mlp_up_flops` (jax_qkvo, jax_qkv) in each dense MLP layer, and the output
               projection :func:`out_proj_flops` (jax_qkv) in each attention layer; moe_act
               repeats an activation function, which no FLOP count here includes, so adds 0; or 0. The MTP
               modules' blocks and projections count as layers here (Megatron-Core checkpoints an MTP module's
               _proj_and_transformer_layer under full recompute; its block is a transformer layer of the same
               config under selective), their logits, like the main logits, are never recomputed.
    """
    n = _arr("sequences", sequences)
    code = recompute_code(recompute)
    fwd = forward_flops(sh, seq_len) * n
    layers_fwd = fwd - logits_flops(sh, seq_len) * (1.0 + sh.mtp_layers) * n
    again = recomputed_modules(sh, code, recompute_modules)
    per_attention = (np.where(again.attention_core, attention_core_flops(sh, seq_len), 0.0)
                     + np.where(again.mla_up_proj, mla_up_projection_flops(sh, seq_len), 0.0)
                     + np.where(again.out_proj, out_proj_flops(sh, seq_len), 0.0))
    per_layer = np.where(again.titan_op, titan_op_recompute_flops(sh, seq_len), 0.0)
    per_moe = np.where(again.moe, mlp_gemm_flops(sh, seq_len, moe=True), 0.0)
    per_mlp = (np.where(again.mlp, mlp_gemm_flops(sh, seq_len), 0.0)
               + np.where(again.jax_qkvo & ~again.mlp, mlp_up_flops(sh, seq_len), 0.0))
    per_moe = per_moe + np.where(again.shared_experts, 2.0 * _arr("seq_len", seq_len) * sh.moe_shared_experts
                                 * np.where(sh.gated_mlp, 3.0, 2.0) * sh.hidden * sh.moe_ffn_hidden, 0.0)
    selective = (per_attention * (sh.attention_layers + sh.mtp_layers) + per_layer * (sh.layers + sh.mtp_layers)
                 + per_moe * (sh.moe_layers + sh.mtp_moe_layers)
                 + per_mlp * (sh.mlp_layers + sh.mtp_layers - sh.mtp_moe_layers)) * n
    extra = np.where(code == Recompute.FULL, layers_fwd, np.where(code == Recompute.SELECTIVE, selective, 0.0))
    model = 3.0 * fwd
    return StepFlops(forward=fwd, model=model, hardware=model + extra, recompute=extra)


def generic_training_flops(flops_per_sample: ArrayLike, samples: ArrayLike,
                           recompute: ArrayLike = "none", backward_factor: ArrayLike = 2.0) -> StepFlops:
    """Generic model: model = (1 + backward_factor) * F * n (3 F n by default); full recompute adds F n.

    Selective recompute has no defined meaning for a generic model and adds nothing.
    """
    fwd = _arr("flops_per_sample", flops_per_sample) * _arr("samples", samples)
    code = recompute_code(recompute)
    extra = np.where(code == Recompute.FULL, fwd, 0.0)
    model = (1.0 + _arr("backward_factor", backward_factor)) * fwd
    return StepFlops(forward=fwd, model=model, hardware=model + extra, recompute=extra)


def megatron_flops(batch: ArrayLike, seq_len: ArrayLike, layers: ArrayLike, hidden: ArrayLike,
                   vocab: ArrayLike, full_recompute: bool = True) -> np.ndarray:
    """Narayanan et al.'s closed form for GPT (f = 4h, MHA), for cross-checks only.

    full recompute: 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)); none: 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)).
    """
    B, s, l, h, V = (np.asarray(x, dtype=float) for x in (batch, seq_len, layers, hidden, vocab))
    if full_recompute:
        return 96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))
    return 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
