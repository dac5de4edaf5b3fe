"""Mamba-2 (SSD) layers and hybrid Mamba / attention / MLP / MoE layer patterns (Nemotron-H, Nemotron 3).

Everything here is pure arithmetic on floats or numpy arrays (broadcasting), SI units (FLOP, bytes, seconds,
parameters as counts). docs/model.md#mamba-2-layers collects the formulas.

**Pattern.** Megatron-Core's hybrid model builds one layer per character of ``hybrid_layer_pattern`` (the older
``hybrid_override_pattern``): ``M`` a Mamba-2 mixer, ``*`` self-attention, ``-`` an MLP, ``E`` an MoE block, each with
its own pre-norm and residual (NVIDIA/Megatron-LM@d98e8a64d megatron/core/models/hybrid/hybrid_layer_allocation.py
``Symbols``; megatron/core/ssm/mamba_layer.py ``MambaLayer.forward``: residual, norm, mixer, bias-dropout-add). ``|``
marks a pipeline-stage boundary and is not a layer. :func:`layer_counts` reads the pattern; the other Megatron
symbols (``G`` gated delta net, ``D`` DeepSeek sparse attention, ``+`` MLA, ``/`` MTP) are refused.

**Mixer.** With hidden h, heads H of head dim P (d_in = H P; Megatron's default H = expand h / P with expand 2),
state width N (``d_state``), groups G (B and C shared by the H/G heads of a group), conv kernel K and chunk Q
(megatron/core/ssm/mamba_mixer.py ``MambaMixer.__init__`` at d98e8a64d)::

    in_proj   h x (2 d_in + 2 G N + H)         [z, x, B, C, dt]; no bias (``assert not bias``)
    conv1d    (d_in + 2 G N) x K weights + (d_in + 2 G N) bias (depthwise, ``assert conv_bias``)
    dt_bias, A_log, D    H each (``D_has_hdim`` False)
    norm      d_in (RMSNormGated gain)          out_proj  d_in x h, no bias
    layer     + h (the pre-norm, fused into in_proj as TE's LayerNormColumnParallelLinear)

Megatron asserts H % tp == 0, G % tp == 0 and H % G == 0 (the same file); :func:`mamba_dims` refuses widths that
break them.

**SSD.** Training calls ``mamba_split_conv1d_scan_combined`` (``_ssm_training``), state-spaces/mamba@e9594ce
mamba_ssm/ops/triton/ssd_combined.py: the causal conv1d (SiLU) on x B C, then the chunked scan of Dao & Gu 2024
("Transformers are SSMs", arXiv 2405.21060 §6, the SSD algorithm): per chunk of Q tokens ``_chunk_cumsum_fwd``
(dt softplus, cumulative decay), ``_chunk_state_fwd`` (the chunk's state B^T X: per head a P x N x Q matmul),
``_state_passing_fwd`` (the recurrence over chunks on the H P N states, fp32), ``_bmm_chunk_fwd`` (C B^T: per group a
Q x Q x N matmul) and ``_chunk_scan_fwd`` (per head (C B^T o L) X, Q x P x Q, plus C times the incoming state,
Q x P x N, with D and the z gate fused). Its backward (``_mamba_chunk_scan_combined_bwd``) recomputes the cumsum,
C B^T, the chunk states and the state passing, and runs dstates (P x N x Q), dx (Q x P x Q and Q x P x N), dB
(Q x N x P), dC (Q x N x P), dCB (Q x Q x P) per head and two ``_bmm_chunk_bwd`` (Q x N x Q) per group. The
conv1d's forward is recomputed in the backward too (``MambaSplitConv1dScanCombinedFn.backward``). So per token, in
FLOP (2 per multiply-accumulate):

    forward  = H (2 Q P + 4 N P) + G (2 Q N)
    backward = H (4 Q P + 10 N P) + G (6 Q N)

Megatron-LM's own FLOP count (training.py ``num_floating_point_operations``, ``mamba_layer_flops``; the same in
Megatron-Bridge flop_utils.py) fixes d_in = 2h whatever the heads and counts the scan as 7 T d_in N; it is
:func:`megatron_mamba_flops`, kept for comparison with the MFU the frameworks print.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from scalemodel.choices import Recompute
from scalemodel.cost.checks import positive as _pos
from scalemodel.cost.compute import gemm_time, memory_time
from scalemodel.cost.transformer import (
    Shape,
    attention_core_flops,
    attention_matrices,
    attention_params,
    embedding_params,
    logits_flops,
    mlp_params,
    recompute_code,
)
from scalemodel.errors import InputError

ArrayLike = Any

#: Megatron-Core's hybrid layer symbols this model prices (hybrid_layer_allocation.py ``Symbols``) and the pipeline
#: separator, which is not a layer.
LAYER_SYMBOLS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
PIPE = "|"


class LayerCounts(msgspec.Struct, frozen=True):
    """Layers of each kind in a hybrid pattern."""

    mamba: int
    attention: int
    mlp: int
    moe: int

    @property
    def layers(self) -> int:
        return self.mamba + self.attention + self.mlp + self.moe


def layer_counts(pattern: str, where: str = "hybrid.pattern") -> LayerCounts:
    """Counts of each layer kind in a Megatron hybrid pattern (``|`` stage separators dropped); InputError on any
    other character or an empty pattern."""
    bad = sorted({c for c in pattern if c not in LAYER_SYMBOLS and c != PIPE})
    if bad:
        raise InputError(f"unknown layer character(s) {''.join(bad)!r} in the hybrid pattern", where=where,
                         allowed="M (Mamba-2), * (attention), - (MLP), E (MoE), | (pipeline-stage boundary)")
    layers = pattern.replace(PIPE, "")
    if not layers:
        raise InputError("the hybrid pattern has no layer", where=where, allowed="at least one of M * - E")
    return LayerCounts(mamba=layers.count("M"), attention=layers.count("*"), mlp=layers.count("-"),
                       moe=layers.count("E"))


class MambaDims(msgspec.Struct, frozen=True, eq=False):  # numpy fields: == has no single truth value
    """Mamba-2 mixer widths (float arrays). Build with :func:`mamba_dims`."""

    hidden: np.ndarray
    heads: np.ndarray  # H
    head_dim: np.ndarray  # P
    state_dim: np.ndarray  # N (d_state)
    groups: np.ndarray  # G
    conv_kernel: np.ndarray  # K
    chunk_size: np.ndarray  # Q

    @property
    def d_inner(self) -> np.ndarray:
        """d_in = H P."""
        return self.heads * self.head_dim

    @property
    def in_proj_width(self) -> np.ndarray:
        """Output width of in_proj: 2 d_in + 2 G N + H (z, x, B, C, dt)."""
        return 2.0 * self.d_inner + 2.0 * self.groups * self.state_dim + self.heads

    @property
    def conv_width(self) -> np.ndarray:
        """Channels of the depthwise conv1d: d_in + 2 G N (x, B, C)."""
        return self.d_inner + 2.0 * self.groups * self.state_dim


def mamba_dims(*, hidden: ArrayLike, head_dim: ArrayLike = 64, state_dim: ArrayLike = 128, groups: ArrayLike = 8,
               heads: ArrayLike | None = None, expand: ArrayLike = 2, conv_kernel: ArrayLike = 4,
               chunk_size: ArrayLike = 128, tp: ArrayLike = 1) -> MambaDims:
    """Validate Mamba-2 widths (Megatron-Core's defaults: head_dim 64, d_state 128, groups 8, d_conv 4, chunk 128,
    expand 2; heads, when not given, expand h / P, which must divide). Refuses what MambaMixer asserts: H % G,
    H % tp, G % tp."""
    h = _pos("hidden", hidden)
    P = _pos("mamba.head_dim", head_dim)
    if heads is None or np.all(np.asarray(heads, dtype=float) == 0):
        d_in = _pos("mamba.expand", expand) * h
        if np.any(np.mod(d_in, P) != 0):
            raise InputError("expand x hidden is not a multiple of head_dim", where="mamba.head_dim",
                             allowed="a divisor of expand x hidden (d_inner = heads x head_dim)")
        H = d_in / P
    else:
        H = _pos("mamba.heads", heads)
    G = _pos("mamba.groups", groups)
    t = _pos("tp", tp)
    for name, num, den, allowed in (("mamba.groups", H, G, "a divisor of the Mamba heads"),
                                    ("tp", H, t, "a divisor of the Mamba heads"),
                                    ("tp", G, t, "a divisor of the Mamba groups")):
        if np.any(np.mod(num, den) != 0):
            raise InputError(f"{name} does not divide {'the heads' if num is H else 'the groups'}", where=name,
                             allowed=allowed)
    return MambaDims(hidden=h, heads=H, head_dim=P, state_dim=_pos("mamba.state_dim", state_dim), groups=G,
                     conv_kernel=_pos("mamba.conv_kernel", conv_kernel), chunk_size=_pos("mamba.chunk_size",
                                                                                          chunk_size))


# --- parameters -------------------------------------------------------------------------------


def mamba_mixer_params(md: MambaDims) -> np.ndarray:
    """Mixer parameters (module docstring): h (2 d_in + 2GN + H) + (K + 1)(d_in + 2GN) + 3H + d_in + d_in h."""
    return (md.hidden * md.in_proj_width + (md.conv_kernel + 1.0) * md.conv_width + 3.0 * md.heads
            + md.d_inner + md.d_inner * md.hidden)


def mamba_layer_params(md: MambaDims) -> np.ndarray:
    """One Mamba layer: the mixer + its pre-norm gain h."""
    return mamba_mixer_params(md) + md.hidden


def hybrid_layer_params(sh: Shape, counts: LayerCounts, md: MambaDims, active: bool = False) -> np.ndarray:
    """Parameters of the layers of a hybrid pattern, each with its one pre-norm (h, 2h with LayerNorm biases):

        M  :func:`mamba_layer_params`          *  attention_params + norm
        -  mlp_params(f) + norm                 E  (E or k routed, + shared) mlp_params(f_e) + router h E + norm

    ``active``: the k routed experts a token passes through instead of all E. Embeddings apart."""
    norm = np.where(sh.biases, 2.0, 1.0) * sh.hidden
    routed = sh.moe_top_k if active else sh.moe_experts
    moe = ((routed + sh.moe_shared_experts) * mlp_params(sh, sh.moe_ffn_hidden) + sh.hidden * sh.moe_experts)
    return (counts.mamba * mamba_layer_params(md) + counts.attention * (attention_params(sh) + norm)
            + counts.mlp * (mlp_params(sh) + norm) + counts.moe * (moe + norm))


# --- FLOPs ------------------------------------------------------------------------------------


def mamba_projection_flops(md: MambaDims, tokens: ArrayLike) -> np.ndarray:
    """Forward FLOPs of in_proj and out_proj for ``tokens`` tokens: 2 T h (2 d_in + 2GN + H) + 2 T d_in h."""
    T = np.asarray(tokens, dtype=float)
    return 2.0 * T * md.hidden * (md.in_proj_width + md.d_inner)


def mamba_conv_flops(md: MambaDims, tokens: ArrayLike) -> np.ndarray:
    """Forward FLOPs of the depthwise causal conv1d: 2 T K (d_in + 2GN) (memory-bound; priced as bytes)."""
    return 2.0 * np.asarray(tokens, dtype=float) * md.conv_kernel * md.conv_width


def ssd_flops(md: MambaDims, tokens: ArrayLike, backward: bool = False) -> np.ndarray:
    """Matmul FLOPs of the SSD chunked scan for ``tokens`` tokens (module docstring):
    forward T [H (2QP + 4NP) + G 2QN], backward T [H (4QP + 10NP) + G 6QN] (the recomputed C B^T and chunk
    states included)."""
    T = np.asarray(tokens, dtype=float)
    H, P, N, G, Q = md.heads, md.head_dim, md.state_dim, md.groups, md.chunk_size
    if backward:
        return T * (H * (4.0 * Q * P + 10.0 * N * P) + G * 6.0 * Q * N)
    return T * (H * (2.0 * Q * P + 4.0 * N * P) + G * 2.0 * Q * N)


def mamba_forward_flops(md: MambaDims, tokens: ArrayLike) -> np.ndarray:
    """Forward FLOPs of one Mamba layer: projections + conv1d + SSD forward."""
    return mamba_projection_flops(md, tokens) + mamba_conv_flops(md, tokens) + ssd_flops(md, tokens)


def megatron_mamba_flops(md: MambaDims, tokens: ArrayLike) -> np.ndarray:
    """Megatron-LM's forward count of one Mamba layer (training.py ``mamba_layer_flops`` at d98e8a64d; Megatron-Bridge
    flop_utils.py the same), d_in fixed at 2h whatever the heads:
    2 T h (2 d_in + 2 G N + H) + 7 T d_in N + 2 T d_in h."""
    T = np.asarray(tokens, dtype=float)
    d_in = 2.0 * md.hidden
    N, G, H = md.state_dim, md.groups, md.heads
    return 2.0 * T * md.hidden * (2.0 * d_in + 2.0 * G * N + H) + 7.0 * T * d_in * N + 2.0 * T * d_in * md.hidden


def hybrid_forward_flops(sh: Shape, counts: LayerCounts, md: MambaDims, seq_len: ArrayLike) -> np.ndarray:
    """Forward FLOPs of a hybrid model for one sequence of length s, layer by kind, in this model's conventions
    (transformer.py module docstring: 2 FLOP per MAC, the full s^2 score matrix, the router counted):

        M  :func:`mamba_forward_flops` (s tokens)
        *  2 s (attention matrix params) + :func:`scalemodel.cost.transformer.attention_core_flops`
        -  2 s (3|2) h f                   E  2 s ((k + shared) (3|2) h f_e + h E)
        logits 2 s h V

    Megatron-LM's hybrid count (training.py ``hybrid_flops``) differs in three places: d_in = 2h and 7 T d_in N for
    the scan (:func:`megatron_mamba_flops`), the causal-halved score matrix, no router and no conv1d."""
    s = _pos("seq_len", seq_len)
    mats = np.where(sh.gated_mlp, 3.0, 2.0)
    attn = 2.0 * s * sum(i * o for _, i, o, _ in attention_matrices(sh)) + attention_core_flops(sh, s)
    mlp = 2.0 * s * mats * sh.hidden * sh.ffn_hidden
    moe = 2.0 * s * ((sh.moe_top_k + sh.moe_shared_experts) * mats * sh.hidden * sh.moe_ffn_hidden
                     + sh.hidden * sh.moe_experts)
    return (counts.mamba * mamba_forward_flops(md, s) + counts.attention * attn + counts.mlp * mlp
            + counts.moe * moe + logits_flops(sh, s))


def hybrid_param_count(sh: Shape, counts: LayerCounts, md: MambaDims, active: bool = False) -> np.ndarray:
    """Total parameters of a hybrid model: :func:`hybrid_layer_params` + embeddings, output layer and final norm
    (:func:`scalemodel.cost.transformer.embedding_params`)."""
    return hybrid_layer_params(sh, counts, md, active=active) + embedding_params(sh)


# --- time -------------------------------------------------------------------------------------


class MambaTime(msgspec.Struct, frozen=True, eq=False):  # numpy fields: == has no single truth value
    """Compute time (seconds) of one Mamba layer for one micro-batch on one GPU: ``forward``, ``backward``,
    ``recompute`` (the forward again under full recompute, else 0), the forward's parts (projection GEMMs, SSD
    matmuls, memory-bound bytes) and ``forward_flops`` on this GPU."""

    forward: np.ndarray
    backward: np.ndarray
    recompute: np.ndarray
    forward_gemm: np.ndarray
    forward_ssd: np.ndarray
    forward_memory: np.ndarray
    forward_flops: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.forward + self.backward + self.recompute


#: fp32 passes over the chunk states (T/Q chunks x H P N) per forward: _chunk_state_fwd writes them, _state_passing_fwd
#: reads and writes them, _chunk_scan_fwd reads them; per backward: the recomputed chunk_state (1) and state passing
#: (2), _chunk_scan_bwd_dstates writes dstates (1), _state_passing_bwd reads dstates and states and writes dstates (3),
#: dx, dB and dC read one each (3) (ssd_combined.py at e9594ce, ``_mamba_chunk_scan_combined_bwd``).
STATE_PASSES_FWD = 4.0
STATE_PASSES_BWD = 10.0
STATE_BYTES = 4.0  # ``states_in_fp32=True``


def mamba_eltwise_bytes(md: MambaDims, *, tp: ArrayLike = 1, sequence_parallel: ArrayLike = False,
                        elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Memory-bound bytes per token of one Mamba layer outside the matmuls, (forward, backward), with w = d_in + 2GN
    the conv channels, eb the element size, widths of split tensors / t:

        forward   pre-norm 2 eb h (/t with sequence parallelism) + conv1d + SiLU read, write 2 eb w + z gate read
                  eb d_in + layout copy (``rearrange(...).contiguous()``) 2 eb d_in + gated RMSNorm 2 eb d_in
                  + residual add 3 eb h (/t with SP)
        backward  2 x forward + the recomputed conv1d 2 eb w

    (mamba_mixer.py ``_ssm_training``, ssd_combined.py ``MambaSplitConv1dScanCombinedFn``: the gate is fused in
    ``_chunk_scan_fwd``, the conv recomputed in the backward.)"""
    t = _pos("tp", tp)
    eb = _pos("elem_bytes", elem_bytes)
    rep = np.where(np.asarray(sequence_parallel, dtype=bool), t, 1.0)
    w = md.conv_width / t
    d_in = md.d_inner / t
    fwd = 5.0 * eb * md.hidden / rep + 2.0 * eb * w + 5.0 * eb * d_in
    return fwd, 2.0 * fwd + 2.0 * eb * w


def mamba_layer_time(md: MambaDims, *, micro_batch: ArrayLike, seq_len: ArrayLike, peak_flops: ArrayLike,
                     memory_bandwidth: ArrayLike, gemm_max: ArrayLike = 0.75, gemm_half_dim: ArrayLike = 96.0,
                     memory_efficiency: ArrayLike = 0.85, tp: ArrayLike = 1, cp: ArrayLike = 1,
                     sequence_parallel: ArrayLike = False, recompute: ArrayLike = "none",
                     elem_bytes: ArrayLike = 2.0, ssd_peak_flops: ArrayLike | None = None) -> MambaTime:
    """Compute time of one Mamba layer for micro-batch b on one GPU; T = b s / cp tokens, t = tp.

    GEMMs on the accelerator's GEMM curve (:func:`scalemodel.cost.compute.gemm_time`), as the other linear layers:
        in_proj  T x (2 d_in + 2GN + H)/t x h          out_proj  T x h x d_in/t
    SSD matmuls (module docstring) as batched GEMMs on the same curve, T/Q chunks, H/t heads, G/t groups,
    forward: (G/t) Q x Q x N [C B^T], (H/t) P x N x Q [chunk state], Q x P x Q and Q x P x N [chunk scan];
    backward: the recomputed C B^T and chunk state, and per head P x N x Q [dstates], Q x P x Q + Q x P x N [dx],
    Q x N x P [dB], Q x N x P [dC], Q x Q x P [dCB], per group 2 x Q x N x Q [bmm backward]; with ``ssd_peak_flops``
    (default the GEMMs' peak) at another precision: the Triton kernels run in the inputs' 16-bit type in an fp8 run.
    Memory-bound: T x :func:`mamba_eltwise_bytes` + the fp32 chunk-state passes STATE_PASSES x 4 (T/Q) (H/t) P N.
    Backward = 2 x projection GEMMs + the SSD backward matmuls + the backward bytes. Full recompute repeats the
    forward; selective recompute names no Mamba module (Megatron-Core's recompute_modules have none) and adds 0.
    Communication (TP all-reduce / SP gathers of the layer, CP all-to-alls) is not included."""
    b = _pos("micro_batch", micro_batch)
    s = _pos("seq_len", seq_len)
    t = _pos("tp", tp)
    c = _pos("cp", cp)
    eb = _pos("elem_bytes", elem_bytes)
    kw = dict(peak_flops=peak_flops, memory_bandwidth=memory_bandwidth, gemm_max=gemm_max,
              gemm_half_dim=gemm_half_dim, memory_efficiency=memory_efficiency, elem_bytes=eb)
    skw = dict(kw, peak_flops=peak_flops if ssd_peak_flops is None else ssd_peak_flops)
    T = b * s / c
    h, H, P, N, G, Q = md.hidden, md.heads / t, md.head_dim, md.state_dim, md.groups / t, md.chunk_size
    chunks = T / Q
    proj = gemm_time(T, md.in_proj_width / t, h, **kw) + gemm_time(T, h, md.d_inner / t, **kw)
    cb = gemm_time(Q, Q, N, chunks * G, **skw)
    state = gemm_time(P, N, Q, chunks * H, **skw)
    qpq = gemm_time(Q, P, Q, chunks * H, **skw)
    qpn = gemm_time(Q, P, N, chunks * H, **skw)
    qnp = gemm_time(Q, N, P, chunks * H, **skw)
    qqp = gemm_time(Q, Q, P, chunks * H, **skw)
    ssd_fwd = cb + state + qpq + qpn
    ssd_bwd = cb + state + state + (qpq + qpn) + 2.0 * qnp + qqp + 2.0 * cb
    own_f, own_b = mamba_eltwise_bytes(md, tp=t, sequence_parallel=sequence_parallel, elem_bytes=eb)
    states = STATE_BYTES * chunks * H * P * N
    mkw = dict(memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
    mem_f = memory_time(T * own_f + STATE_PASSES_FWD * states, **mkw)
    mem_b = memory_time(T * own_b + STATE_PASSES_BWD * states, **mkw)
    forward = proj + ssd_fwd + mem_f
    backward = 2.0 * proj + ssd_bwd + mem_b
    code = recompute_code(recompute)
    recomp = np.where(code == Recompute.FULL, forward, 0.0)
    flops = mamba_forward_flops(mamba_dims_local(md, t), T)
    return MambaTime(forward=forward, backward=backward, recompute=recomp, forward_gemm=proj, forward_ssd=ssd_fwd,
                     forward_memory=mem_f, forward_flops=flops)


def mamba_dims_local(md: MambaDims, tp: ArrayLike) -> MambaDims:
    """The widths one tensor-parallel rank holds: H/t heads and G/t groups (h whole: in_proj is column-parallel,
    out_proj row-parallel), so the rank's FLOPs are the layer's / t."""
    t = _pos("tp", tp)
    return MambaDims(hidden=md.hidden, heads=md.heads / t, head_dim=md.head_dim, state_dim=md.state_dim,
                     groups=md.groups / t, conv_kernel=md.conv_kernel, chunk_size=md.chunk_size)


# --- activation memory --------------------------------------------------------------------------


def mamba_activation_bytes(md: MambaDims, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                           cp: ArrayLike = 1, sequence_parallel: ArrayLike = False, recompute: ArrayLike = "none",
                           fp8_inputs: ArrayLike = False, dropout: ArrayLike = False) -> np.ndarray:
    """Activation bytes one Mamba layer keeps for one micro-batch (s b = tokens on the GPU, t = tp), what autograd
    saves on Megatron-Core's training path (mamba_mixer.py ``_ssm_training``; ssd_combined.py
    ``MambaSplitConv1dScanCombinedFn.forward`` ``ctx.save_for_backward(zxbcdt, ..., out_x, ...)``):

        replicated (/t with SP)  2 s b h [layer input, the fused norm's] + g s b h [in_proj input, the norm output]
                                 + s b h [1-byte dropout mask, when the model has dropout]
        split (/t)               2 s b (2 d_in + 2GN + H) [zxbcdt] + 2 s b d_in [out_x, the scan output]
                                 + 2 s b d_in [the contiguous copy the gated RMSNorm saves]
                                 + g s b d_in [out_proj input]

    g = 1 with FP8 GEMM inputs, else 2. The chunk states, the conv output and dA_cumsum are recomputed in the
    backward, not kept. Full recompute keeps the layer input 2 s b h (/t with SP), as for the other layers."""
    b = _pos("micro_batch", micro_batch)
    s = _pos("seq_len", seq_len) / _pos("cp", cp)
    t = _pos("tp", tp)
    sp = np.asarray(sequence_parallel, dtype=bool)
    g = np.where(np.asarray(fp8_inputs, dtype=bool), 1.0, 2.0)
    sbh = s * b * md.hidden
    mask = np.where(np.asarray(dropout, dtype=bool), 1.0, 0.0)
    replicated = (2.0 + g + mask) * sbh
    split = s * b * (2.0 * md.in_proj_width + 4.0 * md.d_inner + g * md.d_inner)
    kept = np.where(sp, replicated / t, replicated) + split / t
    full = np.where(sp, 2.0 * sbh / t, 2.0 * sbh)
    return np.where(recompute_code(recompute) == Recompute.FULL, full, kept)
