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

from scalemodel.cost.checks import positive as _pos
from scalemodel.errors import InputError

ArrayLike = Any

#: Megatron-Core's hybrid layer symbols this model prices (hybrid_layer_allocation.py ``Symbols``) and the pipeline
#: separator, which is not a layer.
LAYER_SYMBOLS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
PIPE = "|"


class LayerCounts(msgspec.Struct, frozen=True):
    """Layers of each kind in a hybrid pattern, and the kind of its last layer (its symbol)."""

    mamba: int
    attention: int
    mlp: int
    moe: int
    last: str = "M"
    segments: int = 1  # pipeline segments the pattern's '|' marks (Megatron's stage boundaries)
    # the pattern's intervals from one E layer to the next (cyclic: the layers after the last E join those before
    # the first), each as ((mamba, attention, mlp) layers between, how many intervals have those): the host floor's
    # unit (engine.step._host_wait, docs/model.md#host); () without an E layer
    moe_intervals: tuple[tuple[tuple[int, int, int], int], ...] = ()
    # each '|' segment's layers as written (M * - E), in the pattern's order; () without a '|': a rank's own kinds and
    # MoE intervals (engine.pipeline_ranks._part_job, docs/model.md#hybrid-segments). Megatron-LM builds segment j
    # v-stage-major: pipeline rank r, virtual stage c holds segment c pp + r (NVIDIA/Megatron-LM@d98e8a64dd
    # megatron/core/models/hybrid/hybrid_layer_allocation.py lines 466-467, select_pipeline_segment:
    # segment_index = vp_rel * pp_size + pp_rank)
    segment_layers: tuple[str, ...] = ()
    # the pattern's layers as written, '|' dropped: without '|', Megatron-LM splits them by count at pp > 1, so each
    # pipeline rank holds its own run of characters (select_pipeline_segment's auto-split, hybrid_layer_allocation.py
    # lines 385-456 at d98e8a64dd; engine.pipeline_ranks._rank_layers); "" in a rank's or one kind's stand-in model
    layers_as_written: str = ""

    @property
    def layers(self) -> int:
        return self.mamba + self.attention + self.mlp + self.moe

    @property
    def segment_kinds(self) -> tuple[tuple[int, int, int, int], ...]:
        """Each '|' segment's layers of each kind, (mamba, attention, mlp, moe), in the pattern's order; () without
        a '|'."""
        return tuple((seg.count("M"), seg.count("*"), seg.count("-"), seg.count("E")) for seg in self.segment_layers)


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
                       moe=layers.count("E"), last=layers[-1], segments=pattern.count(PIPE) + 1,
                       moe_intervals=moe_intervals(layers),
                       segment_layers=tuple(pattern.split(PIPE)) if PIPE in pattern else (),
                       layers_as_written=layers)


def moe_intervals(layers: str) -> tuple[tuple[tuple[int, int, int], int], ...]:
    """The intervals of a hybrid pattern (no ``|``) from each ``E`` layer to the next, read cyclically (the layers
    after the last E and before the first form one interval): ((Mamba, attention, MLP layers between), count of such
    intervals), sorted; one interval per E layer. "MEM*E-" has E at 1 and 4: "M*" follows the first, "-" + "M" the
    second, so ((1, 0, 1), 1), ((1, 1, 0), 1)."""
    pos = [i for i, c in enumerate(layers) if c == "E"]
    found: dict[tuple[int, int, int], int] = {}
    for j, i in enumerate(pos):
        nxt = pos[(j + 1) % len(pos)]
        between = layers[i + 1:nxt] if nxt > i else layers[i + 1:] + layers[:nxt]
        key = (between.count("M"), between.count("*"), between.count("-"))
        found[key] = found.get(key, 0) + 1
    return tuple(sorted(found.items()))


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


def mamba_dims_local(md: MambaDims, tp: ArrayLike) -> MambaDims:
    """The widths one tensor-parallel rank holds: H/t heads and G/t groups (h whole: in_proj is column-parallel,
    out_proj row-parallel), so the rank's FLOPs are the layer's / t."""
    t = _pos("tp", tp)
    return MambaDims(hidden=md.hidden, heads=md.heads / t, head_dim=md.head_dim, state_dim=md.state_dim,
                     groups=md.groups / t, conv_kernel=md.conv_kernel, chunk_size=md.chunk_size)


def mamba_param_tensors(md: MambaDims) -> list[tuple[np.ndarray, bool]]:
    """A Mamba mixer's parameter tensors as (elements, split by tensor parallelism): in_proj, conv1d weight and bias,
    dt_bias, A_log, D, the gated norm's gain, out_proj (all split: mamba_mixer.py marks each
    ``tensor_model_parallel``); the layer's pre-norm is the transformer's norm tensor."""
    w = md.conv_width
    return [(md.hidden * md.in_proj_width, True), (md.conv_kernel * w, True), (w, True), (md.heads, True),
            (md.heads, True), (md.heads, True), (md.d_inner, True), (md.d_inner * md.hidden, True)]


# --- parameters -------------------------------------------------------------------------------


def mamba_mixer_params(md: MambaDims) -> np.ndarray:
    """Mixer parameters (module docstring): h (2 d_in + 2GN + H) + (K + 1)(d_in + 2GN) + 3H + d_in + d_in h."""
    return (md.hidden * md.in_proj_width + (md.conv_kernel + 1.0) * md.conv_width + 3.0 * md.heads
            + md.d_inner + md.d_inner * md.hidden)


def mamba_layer_params(md: MambaDims) -> np.ndarray:
    """One Mamba layer: the mixer + its pre-norm gain h."""
    return mamba_mixer_params(md) + md.hidden


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
