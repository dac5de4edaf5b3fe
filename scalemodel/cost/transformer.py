"""Parameter and FLOP counts of a decoder/encoder transformer, from its shape alone.

Everything here is pure arithmetic on floats or numpy arrays (broadcasting), in SI units (FLOP,
parameters as counts). Shapes follow the HuggingFace/Megatron conventions:

* ``hidden`` h, ``heads`` a, ``kv_heads`` g (GQA; ``None``/0 means g = a), head dim d = h / a;
* ``ffn_hidden`` f (``None``/0 means 4h), ``gated_mlp`` (SwiGLU: 3 matrices h x f instead of 2);
* ``vocab`` V, ``tied_embeddings`` (input and output embedding share one V x h matrix);
* MoE: ``moe_experts`` E routed experts of width ``moe_ffn_hidden`` (0 means f), ``moe_top_k`` k
  routed experts per token, ``moe_shared_experts`` always-active experts, an MoE MLP on every
  ``moe_every``-th layer after the first ``moe_first_dense`` dense layers (DeepSeek-V3: 3).

Parameter count per layer (weights; biases and norm gains when ``biases``, the GPT/BERT style):

    attention  = h*(a*d) [Q] + 2*h*(g*d) [K,V] + (a*d)*h [O]        (+ biases (a+2g)*d + h)
    dense MLP  = (3 if gated else 2) * h * f                       (+ biases f + h)
    MoE MLP    = (E + shared) * (3|2) * h * f_e + h*E [router]
    norms      = 2 * h (RMSNorm) or 4 * h (LayerNorm with bias)
    total      = layers * per-layer + V*h * (1 if tied else 2) + final norm + learned positions

With a = g, f = 4h and biases this is Megatron's 12*l*h^2*(1 + 13/(12h) + (V+s)/(12*l*h))
[Narayanan et al. 2021, arXiv:2104.04473; docs/model.md#flops].

FLOPs (forward, one sequence of length s, 2 FLOP per multiply-accumulate):

    per layer  = 2*s*(params of the matrices a token passes through)   [GEMMs]
               + 4*s^2*a*d                                             [Q K^T and softmax . V]
    logits     = 2*s*h*V

Training model FLOPs = 3 x forward (backward = 2 x forward); with ffn = 4h, a = g this is exactly
Megatron's 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)). Hardware FLOPs add the recomputation: full
recompute repeats the layers' forward (not the logits): 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h))
[Narayanan et al. 2021 §3 / Appendix]; selective recompute repeats only the attention core
(4*s^2*a*d per layer) [Korthikanti et al. 2022, arXiv:2205.05198 §5]. The s^2 term counts the
full (not causal-halved) score matrix, as Megatron and PaLM's MFU definition do [arXiv:2204.02311
App. B].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from scalemodel.errors import InputError

ArrayLike = Any  # float | np.ndarray; kept loose so callers can pass numbers or arrays

RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}


def recompute_code(value: ArrayLike) -> np.ndarray:
    """Map "none"/"selective"/"full" (or the codes 0/1/2, or an array of codes) to an int array."""
    if isinstance(value, str):
        if value not in RECOMPUTE_CODES:
            raise InputError(f"unknown recompute mode {value!r}", where="recompute",
                             allowed="none, selective, full")
        return np.asarray(RECOMPUTE_CODES[value])
    code = np.asarray(value)
    if code.dtype.kind not in "iub" or np.any((code < 0) | (code > 2)):
        raise InputError("recompute codes must be 0 (none), 1 (selective) or 2 (full)",
                         where="recompute", allowed="none, selective, full")
    return code.astype(int)


def _arr(name: str, value: ArrayLike, *, minimum: float = 0.0, strict: bool = True) -> np.ndarray:
    """Float array, finite and > minimum (or >= minimum when not strict); InputError otherwise."""
    x = np.asarray(value, dtype=float)
    bad = ~np.isfinite(x) | ((x <= minimum) if strict else (x < minimum))
    if np.any(bad):
        op = ">" if strict else ">="
        raise InputError(f"{name} must be finite and {op} {minimum:g}", where=name)
    return x


def _default(value: ArrayLike | None, fallback: np.ndarray) -> np.ndarray:
    """``value`` where given and > 0, else ``fallback`` (element-wise)."""
    if value is None:
        return fallback
    v = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(v) | (v < 0)):
        raise InputError("must be finite and >= 0 (0 or null means the default)", where="shape")
    return np.where(v > 0, v, fallback)


@dataclass(frozen=True)
class Shape:
    """A transformer shape resolved to float arrays (defaults applied). Build with :func:`shape`."""

    layers: np.ndarray
    hidden: np.ndarray
    heads: np.ndarray
    kv_heads: np.ndarray
    ffn_hidden: np.ndarray
    vocab: np.ndarray
    gated_mlp: np.ndarray  # bool
    tied_embeddings: np.ndarray  # bool
    biases: np.ndarray  # bool: GPT/BERT-style linear biases and LayerNorm bias
    moe_experts: np.ndarray  # 0 = dense
    moe_top_k: np.ndarray
    moe_ffn_hidden: np.ndarray
    moe_shared_experts: np.ndarray
    moe_every: np.ndarray
    moe_first_dense: np.ndarray
    position_embeddings: np.ndarray  # learned positions (GPT/BERT), 0 for RoPE
    head_dim: np.ndarray  # d; hidden / heads unless the model sets it

    @property
    def moe_layers(self) -> np.ndarray:
        """Number of layers whose MLP is an MoE block: every ``moe_every``-th after the dense prefix."""
        eligible = np.maximum(self.layers - self.moe_first_dense, 0)
        n = np.floor(eligible / self.moe_every)
        return np.where(self.moe_experts > 0, n, 0.0)

    @property
    def dense_layers(self) -> np.ndarray:
        return self.layers - self.moe_layers


def shape(*, layers: ArrayLike, hidden: ArrayLike, heads: ArrayLike, vocab: ArrayLike,
          kv_heads: ArrayLike | None = None, ffn_hidden: ArrayLike | None = None,
          gated_mlp: ArrayLike = False, tied_embeddings: ArrayLike = True,
          biases: ArrayLike | None = None, moe_experts: ArrayLike = 0, moe_top_k: ArrayLike = 0,
          moe_ffn_hidden: ArrayLike | None = None, moe_shared_experts: ArrayLike = 0,
          moe_every: ArrayLike = 1, moe_first_dense: ArrayLike = 0,
          position_embeddings: ArrayLike = 0, head_dim: ArrayLike | None = None) -> Shape:
    """Validate a transformer shape and apply the defaults (g = a, d = h/a, f = 4h, f_e = f, biases = not gated)."""
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
        raise InputError("MoE top_k must be between 1 and the number of experts", where="moe.top_k")
    if np.any(g > a) or np.any(np.mod(a, g) != 0):
        raise InputError("kv_heads must divide heads", where="kv_heads")
    return Shape(
        layers=L, hidden=h, heads=a, kv_heads=g, ffn_hidden=f, vocab=V, gated_mlp=gated,
        tied_embeddings=np.asarray(tied_embeddings, dtype=bool),
        biases=np.asarray(~gated if biases is None else biases, dtype=bool),
        moe_experts=E, moe_top_k=k, moe_ffn_hidden=_default(moe_ffn_hidden, f),
        moe_shared_experts=_arr("moe_shared_experts", moe_shared_experts, strict=False),
        moe_every=_arr("moe_every", moe_every, minimum=1.0, strict=False),
        moe_first_dense=_arr("moe_first_dense", moe_first_dense, strict=False),
        position_embeddings=_arr("position_embeddings", position_embeddings, strict=False),
        head_dim=_default(head_dim, h / a),
    )


# --- parameters -------------------------------------------------------------------------------


def attention_params(sh: Shape) -> np.ndarray:
    """Q, K, V, O projection weights (+ biases): h*a*d + 2*h*g*d + a*d*h."""
    d = sh.head_dim
    w = sh.hidden * (sh.heads * d) * 2 + 2 * sh.hidden * (sh.kv_heads * d)
    b = np.where(sh.biases, (sh.heads + 2 * sh.kv_heads) * d + sh.hidden, 0.0)
    return w + b


def mlp_params(sh: Shape, width: ArrayLike | None = None) -> np.ndarray:
    """One MLP (or one expert) of width f: (3 if gated else 2)*h*f (+ biases f + h)."""
    f = sh.ffn_hidden if width is None else np.asarray(width, dtype=float)
    mats = np.where(sh.gated_mlp, 3.0, 2.0)
    return mats * sh.hidden * f + np.where(sh.biases, f + sh.hidden, 0.0)


def norm_params(sh: Shape) -> np.ndarray:
    """Two norms per layer: 2h (RMSNorm gain) or 4h (LayerNorm gain + bias)."""
    return np.where(sh.biases, 4.0, 2.0) * sh.hidden


def embedding_params(sh: Shape) -> np.ndarray:
    """Word embeddings (x2 when untied) + learned positions + final norm."""
    word = sh.vocab * sh.hidden * np.where(sh.tied_embeddings, 1.0, 2.0)
    final_norm = np.where(sh.biases, 2.0, 1.0) * sh.hidden
    return word + sh.position_embeddings * sh.hidden + final_norm


def expert_params_per_layer(sh: Shape) -> np.ndarray:
    """Routed experts of one MoE layer (what expert parallelism shards): E * mlp(f_e)."""
    return sh.moe_experts * mlp_params(sh, sh.moe_ffn_hidden)


def layer_params(sh: Shape, moe: bool = False, active: bool = False) -> np.ndarray:
    """Parameters of one layer: dense, or MoE (all experts, or the k routed + shared when ``active``)."""
    base = attention_params(sh) + norm_params(sh)
    if not moe:
        return base + mlp_params(sh)
    n_routed = sh.moe_top_k if active else sh.moe_experts
    experts = (n_routed + sh.moe_shared_experts) * mlp_params(sh, sh.moe_ffn_hidden)
    router = sh.hidden * sh.moe_experts
    return base + experts + router


def param_count(sh: Shape) -> np.ndarray:
    """Total parameters (all experts counted)."""
    return (sh.dense_layers * layer_params(sh) + sh.moe_layers * layer_params(sh, moe=True)
            + embedding_params(sh))


def active_param_count(sh: Shape) -> np.ndarray:
    """Parameters a token passes through: dense layers + MoE layers with k routed + shared experts.

    Embeddings are counted (both matrices when untied), as DeepSeek and Mistral count "active".
    """
    return (sh.dense_layers * layer_params(sh) + sh.moe_layers * layer_params(sh, moe=True, active=True)
            + embedding_params(sh))


# --- FLOPs ------------------------------------------------------------------------------------


def attention_core_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of Q K^T and softmax . V for one sequence, one layer: 4 * s^2 * a * d."""
    s = _arr("seq_len", seq_len)
    return 4.0 * s * s * sh.heads * sh.head_dim


def layer_gemm_flops(sh: Shape, seq_len: ArrayLike, moe: bool = False) -> np.ndarray:
    """Forward FLOPs of the weight GEMMs of one layer for one sequence: 2 * s * (matrix params used)."""
    s = _arr("seq_len", seq_len)
    d = sh.head_dim
    attn = 2.0 * sh.hidden * sh.heads * d + 2.0 * sh.hidden * sh.kv_heads * d
    mats = np.where(sh.gated_mlp, 3.0, 2.0)
    if moe:
        mlp = ((sh.moe_top_k + sh.moe_shared_experts) * mats * sh.hidden * sh.moe_ffn_hidden
               + sh.hidden * sh.moe_experts)
    else:
        mlp = mats * sh.hidden * sh.ffn_hidden
    return 2.0 * s * (attn + mlp)


def logits_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of the output projection for one sequence: 2 * s * h * V."""
    return 2.0 * _arr("seq_len", seq_len) * sh.hidden * sh.vocab


def forward_flops(sh: Shape, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs for one sequence: all layers (GEMMs + attention core) + logits."""
    core = attention_core_flops(sh, seq_len)
    layers = (sh.dense_layers * (layer_gemm_flops(sh, seq_len) + core)
              + sh.moe_layers * (layer_gemm_flops(sh, seq_len, moe=True) + core))
    return layers + logits_flops(sh, seq_len)


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of one training step (arrays). ``model`` is for MFU, ``hardware`` (with recompute) for HFU."""

    forward: np.ndarray
    model: np.ndarray
    hardware: np.ndarray
    recompute: np.ndarray


def training_flops(sh: Shape, seq_len: ArrayLike, sequences: ArrayLike,
                   recompute: ArrayLike = "none") -> StepFlops:
    """Training FLOPs for ``sequences`` sequences of length ``seq_len`` (a global batch).

    model    = 3 * forward                               (forward + backward = 2 x forward)
    hardware = model + recompute, where recompute is the layers' forward (full) or the attention
               core 4*s^2*a*d per layer (selective), or 0.
    """
    n = _arr("sequences", sequences)
    code = recompute_code(recompute)
    fwd = forward_flops(sh, seq_len) * n
    layers_fwd = fwd - logits_flops(sh, seq_len) * n
    core = attention_core_flops(sh, seq_len) * sh.layers * n
    extra = np.where(code == 2, layers_fwd, np.where(code == 1, core, 0.0))
    model = 3.0 * fwd
    return StepFlops(forward=fwd, model=model, hardware=model + extra, recompute=extra)


def generic_training_flops(flops_per_sample: ArrayLike, samples: ArrayLike,
                           recompute: ArrayLike = "none", backward_factor: ArrayLike = 2.0) -> StepFlops:
    """Generic model: model = (1 + backward_factor) * F * n (3 F n by default); full recompute adds F n.

    Selective recompute has no defined meaning for a generic model and adds nothing.
    """
    fwd = _arr("flops_per_sample", flops_per_sample) * _arr("samples", samples)
    code = recompute_code(recompute)
    extra = np.where(code == 2, fwd, 0.0)
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
