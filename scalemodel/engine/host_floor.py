"""The host floor of a synchronising MoE layer, scaled from its measured source by the bottom-up count
(docs/model.md#host, "CUDA graphs of part of the layer").

``H`` (strategy ``moe_layer_host_s``) is measured on one configuration: Megatron-Bridge 25.11 on a DGX-B200 (x86),
Qwen3-30B-A3B MXFP8, TP 1, EP 8 (16 local experts), MBS 1, CUDA graphs of the MoE router and preprocess only, so
attention and the expert path run eagerly. Another run issues other work per MoE layer: a CUDA graph of attention
removes attention's calls, and the grouped linears issue per-expert kernels and Python steps, so fewer local experts
issue less. The functions here scale the measured ``H`` by the bottom-up count of the two configurations, in both:

    H_row = H x min_p count_p(row) / count_p(source)
    count_p(n, attention) = [attention] A_p + E_p + n e_p          (us, one MoE layer forward + backward)

``p`` the count's two pricings (every call class at its low, then its high per-call cost); ``A_p`` attention's
calls (3 Transformer Engine modules and 5 eager ops each way), ``E_p`` the expert path's fixed calls (the two
grouped linears' modules, 11 eager ops each way, the grouped GEMM's stream events, the per-module launches that do
not scale), ``e_p`` its calls per local expert (per grouped linear: an MXFP8 quantize and a GEMM forward, a quantize,
a dgrad and a wgrad GEMM backward, six Python steps each way); the source is ``count_p(16, True)``. The counts and
costs are hardware/measurements/host_overhead.yaml ``moe_layer_bottom_up`` (Megatron-LM 92c8482e6d, Transformer
Engine release_v2.9), held here as :data:`CALL_COST_US` and :data:`CALLS` (tests/test_host_floor_scope.py checks them
against the YAML). The lower of the two pricings' ratios is taken, as for the recomputed share ``r``
(:data:`scalemodel.engine.step.MOE_FORWARD_HOST_SHARE`), so the floor stays the lower end.

What the count does not hold, each left at zero (so the floor stays a lower bound where a run issues it; the
unfused layer paths' op calls are added apart, :func:`eager_ops_host_s`): the router
and the dispatcher's preprocess (graphed in the source; a run that leaves them eager issues more), shared experts,
a latent MoE's projections and MLA's extra attention linears (none in the source's Qwen3 layer), and the
precision's own calls (the count is MXFP8's: a BF16 run issues no per-expert quantize kernels, which the ratio does
not remove). The count prices 30-43 % of ``H`` (the rest is Megatron-Core's Python, autograd, the allocator); the
ratio assumes that rest scales as the priced calls do.

What the validator applies (scripts/validate_training.py ``host_floor_s``): the graph scope only, with ``n`` held at
the source's 16 (``host_floor_scale(16, attention)``: 1 with attention eager, 0.7151 with attention graphed or no
attention in the MoE layer). The count's per-expert slope is refuted by held-out runs: the two DGX-H100 Qwen3-30B runs
at EP 16 (8 local experts; tests/test_host_floor.py) are predicted -0.7 % and +6.6 % with ``H`` unscaled and +30.9 %
and +40.4 % with the slope (0.7508 ``H``), so the unpriced rest evidently does not follow the per-expert calls, and
no dependence on the local experts is priced until a measurement shows one (docs/model.md#host). ``local_experts``
stays an argument for that measurement and for what-ifs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalemodel.choices import FlexBackend

#: Local experts of ``H``'s source layer (Qwen3-30B-A3B, 128 experts over EP 8).
SOURCE_LOCAL_EXPERTS = 16

#: Per-call host costs in microseconds, (low, high), on an x86 DGX host: host_overhead.yaml
#: ``moe_layer_bottom_up.costs_us`` (module: TE pull request 1191; op: PyTorch issue 161822 / TE issue 2053; launch:
#: NVIDIA/raft pull request 1736; event: dream-go pull request 58's nvprof; basic: TE pull request 1191's O(1 us)).
CALL_COST_US: dict[str, tuple[float, float]] = {
    "module": (115.0, 140.0), "op": (8.3, 13.5), "launch": (5.0, 10.0), "event": (0.949, 1.094), "basic": (1.0, 1.0)}

#: Calls of one MoE layer per (part, pass), each class as (fixed, per local expert), from host_overhead.yaml
#: ``moe_layer_bottom_up.parts`` (its counts at n = 16): the expert path's forward launches are 2 (2n + 1) (per
#: grouped linear n quantizes, n GEMMs, 2 scale swizzles, less the GEMM the module figure holds), its backward's
#: 2 (3n + 3); its Python steps 6n per grouped linear each way; its events 1 + 3g per grouped GEMM (g = 4 streams),
#: two grouped GEMMs forward and four backward.
CALLS: dict[tuple[str, str], dict[str, tuple[int, int]]] = {
    ("attention", "fwd"): {"module": (3, 0), "op": (5, 0)},
    ("attention", "bwd"): {"module": (3, 0), "op": (5, 0)},
    ("moe", "fwd"): {"module": (2, 0), "op": (11, 0), "launch": (2, 4), "event": (26, 0), "basic": (0, 12)},
    ("moe", "bwd"): {"module": (2, 0), "op": (11, 0), "launch": (6, 6), "event": (52, 0), "basic": (0, 12)},
}


#: Host calls one MoE layer issues beyond ``H``'s source layer where Megatron-Core runs an unfused path
#: (docs/model.md#eager-layer-ops, the rows' StrategySpec.eager_* flags), as (forward, backward), each (fixed, per local
#: expert), counted from the code at NVIDIA/Megatron-LM 2d1fa8d372 (the 26.04 submodule; the same files at
#: d1410e15e1): forward, eager ops issued from Python that launch device work (views not counted), class 'op';
#: backward, the kernels autograd's C++ engine launches for them, class 'launch' (:func:`eager_ops_host_s`). The
#: source's count already holds fused RoPE (one call each way for q and for k), one bias-dropout-add and the compiled
#: activation, so only the difference is here (the base count's own differences, such as GPT-OSS's missing QK norms,
#: are left to it, as for every row):
#:
#:   rope              _apply_rotary_pos_emb_bshd (rope_utils.py L110-126) for q and k, 12 each forward (cos, mul,
#:                     cast, sin, mul, cast of the freqs; t cos, neg, cat, mul, add, cat), 7 each backward (two muls,
#:                     neg, chunk's cat, two gradient adds, a slice's zeros): 24 - 2 forward, 14 - 2 backward
#:   bias_dropout_add  _bias_dropout_add_func (fused_bias_dropout.py): x + bias, then residual + out (dropout p 0
#:                     returns its input): 2 - 1 forward; backward the bias sum against the compiled kernel's: 0
#:   glu_clamp         weighted_bias_quick_geglu_impl (fused_bias_geglu.py L422-434): two clamps, cat and the
#:                     linear_offset tensor forward (4); backward two clamp_backwards and chunk's cat (9): PyTorch's
#:                     clamp_backward (torch/csrc/autograd/FunctionsManual.cpp, Scalar overload) builds
#:                     ``at::scalar_tensor(0., grad.options())``, on CUDA an empty tensor and a fill_ kernel, then
#:                     the one-sided clamp ``where(self <= max, grad, zero)`` (fill, le, where: 3) and the two-sided
#:                     ``where((self >= min).logical_and_(self <= max), grad, zero)`` (fill, ge, le, logical_and_,
#:                     where: 5); chunk's SplitBackward is one cat (split_with_sizes_backward). (7 before review25b,
#:                     which left out the two fills.)
#:   expert_bias       TEGroupedMLP._apply_bias (experts.py L252-269): b p and t + b p per local expert, one cat
#:                     (2n + 1); backward per expert grad p, its sum to b, grad b, its sum to p, and the two splits'
#:                     cats (4n + 2)
#:   expert_bias_wide  with the probabilities wider than the 16-bit activations (fp32: the flex dispatcher, whose
#:                     HybridEP and DeepEP upcast them, token_dispatcher.py L1058-1064 / L1207-1213 at 2d1fa8d372; or
#:                     moe_router_dtype fp32), ``t + b p`` is fp32 and _apply_bias's final ``.to(dtype)`` casts
#:                     (1 forward); backward its cast up (1) and autograd's engine casting t's and b's gradients down
#:                     to their 16-bit inputs per expert (validate_outputs: 2n) (review25b)
#:
#: ``rope`` and ``bias_dropout_add`` sit in the attention block: a graph of attention issues them, so they count only
#: where attention runs eagerly.
EAGER_OP_CALLS: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "rope": ((22, 0), (12, 0)), "bias_dropout_add": ((1, 0), (0, 0)),
    "glu_clamp": ((4, 0), (9, 0)), "expert_bias": ((1, 2), (2, 4)),
    "expert_bias_wide": ((1, 0), (1, 2))}


def eager_ops_host_s(local_experts: Any, attention: Any = True, *, rope: Any = False, bias_dropout_add: Any = False,
                     glu_clamp: Any = False, expert_bias: Any = False, wide_probs: Any = False) -> np.ndarray:
    """Host seconds per MoE layer (forward + backward) of the calls of :data:`EAGER_OP_CALLS` a row issues beyond
    ``H``'s source (each flag one unfused path, ``wide_probs`` the expert bias's casts with fp32 probabilities;
    numpy-broadcasting), at the count's low per-call costs
    (:data:`CALL_COST_US`): a forward op from Python 8.3 us ('op'), a backward kernel from autograd's C++ engine 5 us
    ('launch'). Added to the row's floor, not scaled with it, so the floor stays the lower end (each call costs at
    least its own issue time; how the unpriced rest of ``H`` follows extra calls is not measured, and for per-expert
    calls the held-out runs refute the count's ratio, module docstring). The step model adds it to strategy
    ``moe_layer_host_s`` from the strategy's eager_* flags (:func:`scalemodel.engine.step.moe_host_s`). At 16 local
    experts with attention eager and every path: 60 forward calls and 87 backward launches, 498 + 435 = 933 us;
    attention graphed 37 and 75, 307.1 + 375 = 682.1 us."""
    att = np.asarray(attention, dtype=bool)
    on = {"rope": np.asarray(rope, dtype=bool) & att,
          "bias_dropout_add": np.asarray(bias_dropout_add, dtype=bool) & att,
          "glu_clamp": np.asarray(glu_clamp, dtype=bool), "expert_bias": np.asarray(expert_bias, dtype=bool),
          "expert_bias_wide": np.asarray(expert_bias, dtype=bool) & np.asarray(wide_probs, dtype=bool)}
    n = np.asarray(local_experts, dtype=float)
    total = np.zeros(np.broadcast(n, *on.values()).shape)
    for path, ((f0, f1), (b0, b1)) in EAGER_OP_CALLS.items():
        us = (f0 + f1 * n) * CALL_COST_US["op"][0] + (b0 + b1 * n) * CALL_COST_US["launch"][0]
        total = total + np.where(on[path], us, 0.0)
    return np.asarray(total * 1e-6, dtype=float)


def part_host_us(part: tuple[str, str], local_experts: Any, pricing: int = 0) -> np.ndarray:
    """Priced host time (us) of one (part, pass) of :data:`CALLS` at ``local_experts`` experts per rank
    (numpy-broadcasting), at the count's low (``pricing`` 0) or high (1) per-call costs. The expert path's forward
    ("moe", "fwd") at 16 experts: 867.97 us (low), 1308.94 us (high); at 8: 611.97 / 892.94 us."""
    n = np.asarray(local_experts, dtype=float)
    return np.asarray(sum((fixed + per * n) * CALL_COST_US[k][pricing] for k, (fixed, per) in CALLS[part].items()),
                      dtype=float)


def layer_host_count_us(local_experts: Any, attention: Any = True, pricing: int = 0) -> np.ndarray:
    """Priced host time (us) of one MoE layer's forward and backward: :data:`CALLS` at ``local_experts`` experts per
    rank (numpy-broadcasting), attention's part only where ``attention`` (it runs eagerly in the layer), at the
    count's low (``pricing`` 0) or high (1) per-call costs. At 16 experts with attention: 2713.62 us (low), 3981.33 us
    (high), the totals of host_overhead.yaml ``evaluation_moe``."""
    n = np.asarray(local_experts, dtype=float)
    att = np.asarray(attention, dtype=bool)
    total = np.zeros(np.broadcast(n, att).shape)
    for part in CALLS:
        us = part_host_us(part, n, pricing)
        total = total + (np.where(att, us, 0.0) if part[0] == "attention" else us)
    return np.asarray(total, dtype=float)


def expert_forward_host_share(attention: Any = True) -> np.ndarray:
    """The share of a layer's host time that its expert path's forward issues after the dispatcher's host
    synchronisation (docs/model.md#host-issue-order), from the count at the source's 16 local experts, at the lower
    of the two pricings: ``min_p fwd_p / count_p(16, attention)``, ``fwd_p`` the ("moe", "fwd") calls of
    :data:`CALLS` (two grouped-linear modules, 11 eager ops from the dispatch all-to-alls to the combine, the
    per-expert launches, events and Python steps). With attention in the count: 867.97 / 2713.62 = 0.3199 (low),
    1308.94 / 3981.33 = 0.3288 (high): 0.3199, :data:`scalemodel.engine.step.MOE_FORWARD_HOST_SHARE`; without (a
    hybrid pattern's E layer, the MoE block alone): 867.97 / 1940.62 = 0.4473, 1308.94 / 3006.33 = 0.4354: 0.4354."""
    shares = [part_host_us(("moe", "fwd"), SOURCE_LOCAL_EXPERTS, p) / layer_host_count_us(SOURCE_LOCAL_EXPERTS,
                                                                                          attention, p)
              for p in (0, 1)]
    return np.asarray(np.minimum(*shares), dtype=float)


def host_floor_scale(local_experts: Any, attention: Any = True) -> np.ndarray:
    """``min_p count_p(local_experts, attention) / count_p(16, True)``: the share of the measured ``H`` a row's MoE
    layer issues (module docstring). 1 for the source's configuration; 0.7151 for 16 local experts with attention
    graphed (the expert path alone, low pricing); 0.6263 for 4 local experts eagerly (high pricing)."""
    ratios = [layer_host_count_us(local_experts, attention, p) / layer_host_count_us(SOURCE_LOCAL_EXPERTS, True, p)
              for p in (0, 1)]
    return np.asarray(np.minimum(*ratios), dtype=float)


def moe_layer_host_floor(H: Any, local_experts: Any, attention: Any = True) -> np.ndarray:
    """Host seconds per MoE layer (forward + backward) of a row whose dropless dispatcher synchronises the host:
    ``H x`` :func:`host_floor_scale` (docs/model.md#host). ``attention`` False where the run graphs attention
    (cuda_graph_scope ``attn``) or the MoE layer holds no attention (a hybrid pattern's E layer). The validation rule
    passes ``local_experts`` = :data:`SOURCE_LOCAL_EXPERTS` whatever the row's (module docstring: the per-expert slope
    is refuted by held-out runs), so its floor is ``H`` or 0.7151 ``H``."""
    return np.asarray(np.asarray(H, dtype=float) * host_floor_scale(local_experts, attention), dtype=float)


#: The round trip of one small device-to-host copy on a PCIe host (us): "a cudaMemcpy can incur in a 6-7us overhead"
#: (NVIDIA/gdrcopy README, "What is inside"; NVIDIA's GDRCopy page measures cudaMemcpy's D2H latency against its
#: own on a DGX-1V, CUDA 10.1). A synchronous cudaMemcpy returns to the host only once its DMA is done, so the figure
#: holds the copy, its completion and the host's return: what one dispatcher synchronisation adds before the host can
#: issue again (docs/model.md#host-refill). The low end; no Grace C2C figure was found.
SYNC_ROUND_TRIP_US = 6.0


def refill_exposed(host: Any, device: Any, start: Any = 0.0) -> np.ndarray:
    """Device idle time after a host synchronisation that left the GPU queue empty (docs/model.md#host-refill):
    the host issues kernels 1..K one after another, kernel i costing it ``host[i]`` after ``start`` (the sync's
    round trip), the device runs them in order, kernel i taking ``device[i]`` once issued and once kernel i-1 is
    done. Kernel k starts no earlier than its issue, ``start + sum_{i<=k} h_i``, and the device has by then run at
    most ``sum_{i<k} d_i``, so the idle up to the last kernel's end is

        exposed = start + max_k (sum_{i<=k} h_i - sum_{i<k} d_i)

    (the two-stage chain's ``max_j (sum_{i<=j} h_i + sum_{i>=j} d_i)`` less the device's own ``sum_i d_i``). Kernels
    on the last axis; at least ``start + h_1``; ``start + sum h - sum d + d_K`` where every kernel is host-bound."""
    h = np.asarray(host, dtype=float)
    d = np.asarray(device, dtype=float)
    ran_before = np.cumsum(d, axis=-1) - d
    return np.asarray(np.asarray(start, dtype=float) + np.max(np.cumsum(h, axis=-1) - ran_before, axis=-1),
                      dtype=float)


def sync_refill_us(flex: Any, backend: Any, allgather: Any) -> tuple[np.ndarray, np.ndarray]:
    """(round trip, first issue), us, that one dispatcher synchronisation exposes at the lower end
    (docs/model.md#host-refill): the refill's ``start`` and ``h_1`` of :func:`refill_exposed`, by what the host reads
    and what the device still holds when it returns (numpy-broadcasting over the strategy's dispatcher flags):

    * all-to-all (neither flag): 0, 0. The split sizes are copied on a side stream at ``cuda_dtoh_point`` and waited
      on at ``cuda_sync_point`` with the first permutation issued in between (NVIDIA/Megatron-LM@d98e8a64dd
      token_dispatcher.py ``_maybe_dtoh_and_synchronize``), so the device runs the permutation through the copy's
      round trip and the all-to-all's issue; at the lower end nothing is exposed beyond the expert path's shortfall.
    * HybridEP: 6, 5. ``dispatch_postprocess`` copies the tokens per expert into pinned memory with
      ``copy_(..., non_blocking=false)`` after the permute-processing kernel and only then launches the permutation
      (deepseek-ai/DeepEP@0237ba624a csrc/hybrid_ep/executor/executor.cu; ``tokens_per_expert.cpu()`` at 2313535d73):
      a synchronous D2H copy with nothing queued behind it (:data:`SYNC_ROUND_TRIP_US`), then one C++-issued launch
      (:data:`CALL_COST_US` 'launch', low).
    * DeepEP: 0, 5. The host spins on counters the notify kernel writes to mapped host memory and then launches the
      dispatch (``Buffer::intranode_dispatch``, "Synchronize total received tokens and tokens per expert"): no copy,
      and no published latency for a mapped-memory read, so 0; then one launch.
    * allgather: 6, 8.3. ``local_map.sum(dim=0).long().cpu()`` after the all-gather (token_dispatcher.py L320) is a
      blocking copy of a tensor the last kernel produced, followed by the eager permutation ops ('op', low)."""
    f = np.asarray(flex, dtype=bool)
    hybrid = f & (np.asarray(backend) == FlexBackend.HYBRIDEP)
    ag = np.asarray(allgather, dtype=bool) & ~f
    trip = np.where(hybrid | ag, SYNC_ROUND_TRIP_US, 0.0)
    first = np.where(f, CALL_COST_US["launch"][0], np.where(ag, CALL_COST_US["op"][0], 0.0))
    return np.asarray(trip, dtype=float), np.asarray(first, dtype=float)


def refill_bound_us(local_experts: Any, syncs: Any = 1, forwards: Any = 1) -> np.ndarray:
    """The most one MoE layer pass can expose through the refill of its drained queues at the published per-call
    costs (docs/model.md#host-refill): ``syncs`` synchronisations' round trips (:data:`SYNC_ROUND_TRIP_US`) and the
    expert path's forward, issued ``forwards`` times (a recomputed MoE block issues it again) on an empty queue, at
    the count's high per-call costs (:func:`part_host_us` ("moe", "fwd") at the row's local experts) with no device
    time under it: :func:`refill_exposed` with every ``d_i`` 0, ``6 syncs + forwards fwd_1(n)`` us (two
    synchronisations inside one expert path split its issue between them, so its host time counts once a forward).
    1314.94 us at 16 local experts, 898.94 at 8, 690.94 at 4 (one synchronisation, one forward)."""
    issue = np.asarray(forwards, dtype=float) * part_host_us(("moe", "fwd"), local_experts, 1)
    return refill_exposed(issue[..., None], np.zeros(1), np.asarray(syncs, dtype=float) * SYNC_ROUND_TRIP_US)
