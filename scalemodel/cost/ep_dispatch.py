"""Hierarchical expert-parallel dispatch/combine (DeepEP, HybridEP): bytes per tier and time.

Megatron-Core's ``alltoall`` token dispatcher permutes every (token, expert) pair into its own row and moves
the rows with NCCL's all-to-all (``MoEAlltoAllTokenDispatcher``), which the step model prices as an
all-to-all of ``T k h eb`` bytes per rank (docs/model.md#ep-comm; this module: docs/model.md#ep-hierarchical).
The ``flex`` dispatcher
(``moe_token_dispatcher_type='flex'``, backend ``moe_flex_dispatcher_backend`` 'deepep' or 'hybridep';
``MoEFlexTokenDispatcher`` with ``_DeepepManager`` / ``_HybridEPManager``, Megatron-LM
megatron/core/transformer/moe/token_dispatcher.py and fused_a2a.py @002255075c) moves each token once per
destination *domain* and once per destination *GPU*, not once per expert:

- DeepEP internode dispatch (deepseek-ai/DeepEP csrc/kernels/internode.cu @92fe2de, kernel ``dispatch``): the
  ``kRDMASender`` warps walk the tokens and, for each RDMA rank (node) ``lane_id``, read the 8 bytes of
  ``is_token_in_rank`` covering that node's ``NUM_MAX_NVL_PEERS`` = 8 GPUs and send the token once if any is
  set (``is_token_in_rank_uint64 != 0``; the own node's copy goes to the local ``recv_buffer``, not the NIC),
  to the GPU of the same local rank there; the ``kRDMAAndNVLForwarder`` warps then forward each received
  token over NVLink to every GPU of the node it is meant for (``src_meta.is_token_in_nvl_rank(dst_nvl_rank)``).
  The combine runs the same path backwards, reducing inside the node before the RDMA send. The byte counts of
  the library's own benchmark are these: tests/test_internode.py counts ``num_rdma_token_sent`` = distinct
  (token, node) pairs x hidden x 2 bytes.
- HybridEP (deepseek-ai/DeepEP branch hybrid-ep @94a9f8f, docs/Hybrid-EP_Implementation.md section 8: "Similar
  to DeepEP, Hybrid-EP first performs IB communication between peer GPUs [the same local rank on other
  nodes], then each rank distributes the received inter-node data locally"; the dispatch kernel keeps one
  ``attn_to_rdma_map`` flag per token and remote node and one ``sparse_to_dense_map`` entry per token and
  rank of the node, csrc/hybrid_ep/backend/hybrid_ep_backend.cuh). Its "node" is the NVLink domain
  (``NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN``, detected), 72 GPUs on a GB200 NVL72.
- DeepSeek-V3 (arXiv:2412.19437 section 3.2.2): a token "will first be transmitted via IB to the GPUs with the
  same in-node index on its target nodes" and then "forwarded via NVLink to specific GPUs that host their
  target experts"; its node-limited routing (at most M = 4 nodes per token) is a property of the router, not
  of the kernel, and is not assumed here.

Formula. ``p`` EP ranks, ``G`` of them per tier-0 (NVLink) domain, ``D = p / G`` domains, ``E`` experts,
``E/p`` per rank, top-``k`` routing, ``x = T h eb`` the bytes of one rank's tokens. Routing uniform: each
token's k experts a uniformly random k-subset of the E, independently of other tokens (Megatron-Core's
``moe_router_force_load_balancing`` draws normal logits per token, ``RandomSTE``, router.py @002255075c, so its
top-k is exactly that; HybridEP's benchmarks use "Router: Random Uniform"; the rest of the MoE model already
prices experts at the mean, ``M = ep etp T k / (E tp)`` tokens each, and the busiest rank apart:
:mod:`scalemodel.cost.moe_routing`). The probability that a set of
``m`` experts receives none of a token's k is ``C(E - m, k) / C(E, k) = prod_(i<k) (E - m - i)/(E - i)``, so
one group of ``E/n`` experts (one of n equal parts) is hit with

    q(n) = 1 - C(E - E/n, k) / C(E, k)

and the expected distinct parts hit is ``n q(n)``. Per rank per dispatch (the combine moves the same):

    inter-domain bytes (RDMA, each rank's own NIC) = x (D - 1) q(D)
    intra-domain bytes (NVLink forward)          = x (p - D) q(p)

(A group that ends in a partial domain, which the kernels refuse, is priced from a rank of a whole domain:
:func:`hierarchical_bytes`.) The first: each of the D - 1 other domains is hit with probability q(D) and then gets
the token once. The second: the forwarder in each of the D domains (for the own domain, the sending rank itself)
copies the token to each of the G - 1 other ranks of that domain that hold one of its experts, each hit with q(p);
summed over D domains, D (G - 1) q(p) = (p - D) q(p). Against NCCL's all-to-all (``x k (p - G)/p`` across domains,
``x k (G - 1)/p`` inside) the union bound ``q(n) <= k/n`` gives inter <= NCCL's inter and intra <= D x NCCL's
intra. The inter-domain share is split over the outer tiers as the domains are: ``(c_i - c_(i-1)) / G`` of the
remote domains lie across tier i. The peer is the same local rank, so on a rail-optimised fabric the traffic
stays on its rail (no PXN).

Expert tensor parallelism (etp > 1). ``MoEFlexTokenDispatcher`` (token_dispatcher.py @d98e8a64dd L1831-1856)
runs on the ``tp_ep_group`` of ``etp ep`` ranks (etp innermost, the expert grid's tp-ep-dp order, so stride 1) and
hands DeepEP ``router_topk = etp k`` and ``num_experts = etp E`` (HybridEP ``num_experts = etp E``): its
``_initialize_metadata`` (L1892-1918) repeats each expert's column for the etp ranks that hold a slice of it, so a
token routed to k experts is routed to ``etp k`` of ``etp E`` (rank, local expert) columns. Those are not a uniform
``etp k``-subset: the etp copies of an expert go together. With ``p = etp ep`` ranks, a domain of ``G`` ranks
(etp | G) holds ``E G / p = E / D`` of the real experts and a rank the ``E / ep = etp E / p`` of its EP index, so
with the real (E, k) routing

    inter-domain bytes = x (D - 1) q(D),     intra-domain bytes = x (p - D) q(p / etp)

(q of ``E`` and ``k``; etp = 1 is the formula above). What the kernels carry per copy follows the passed sizes:
HybridEP's probabilities are ``NUM_OF_EXPERTS_PER_RANK x ranks per domain = (etp E / p) G = etp E / D`` floats, and
DeepEP's slot has ``etp k`` top-k indices and weights.

Time: the RDMA senders and NVLink forwarders run at once (warp-specialised, pipelined), so

    t = max(intra / B_0, sum_(i>=1) inter_i / B_i) + alpha_0 [G > 1] + max_(i crossed, i >= 1) alpha_i

with ``B_i`` the placement's effective per-GPU bandwidth of tier i (line rate x efficiency / taper) times the
kernel efficiency below (``eta_nvl`` for tier 0, ``eta_rdma`` for the outer tiers). No NCCL
protocol or base latency (the kernels are not NCCL's); the send is one-shot (all peers at once), so one hop
latency per tier crossed, not one per peer. The busiest receiver: the layer waits for the rank that receives the
most, so each term is scaled by its expected max / mean under random routing (``tokens`` given:
:func:`hierarchical_load_factors`, distinct tokens per receiver, :mod:`scalemodel.cost.moe_routing`) or by a
measured max / mean (``imbalance``; docs/model.md#moe-rank-imbalance).

Routing probabilities. HybridEP's forward dispatch copies, with each token, the fp32 routing probabilities of
all the experts of the destination domain (``NUM_OF_EXPERTS_PER_RANK * NUM_OF_RANKS_PER_NODE`` floats:
``intra_node_prob_buffer`` and ``remote_expert_output_prob`` in the NVLink stage, ``prob_per_token`` in the RDMA
puts, csrc/hybrid_ep/backend/hybrid_ep_backend.cuh @94a9f8f), ``4 E / D`` bytes per token per copy on both
tiers; the backward combine reduces them back the same way (BACKWARD_COMBINE). The forward combine and the
backward dispatch move the hidden state only. ``prob_tokens`` (the tokens whose probabilities travel) adds
``prob_tokens * 4 E / D`` to the bytes of each copy.

Kernel efficiency (``KERNEL_EFFICIENCY_NVLINK``, ``KERNEL_EFFICIENCY_RDMA``): the kernels' published
bandwidth against this model at the catalog's tier efficiencies. Source: deepseek-ai/DeepEP branch hybrid-ep
@94a9f8f docs/README_Hybrid-EP.md, "Kernel Only" columns (kineto kernel time), 4096 tokens per rank, hidden
7168, top-8, 8 experts per rank, "Router: Random Uniform", BF16 dispatch and combine; the benchmark
(tests/test_mnnvlink_hybridep.py @6ad6896 for the GB200 table, tests/test_hybrid_ep.py @1dddd19 for the H100
one) dispatches with ``topk_weights`` and combines with ``probs``, but counts the hidden bytes only
(``dispatched_hidden.numel() * 2``; ``count_rdma_send_from_routing_map * HIDDEN_DIM * 2``, own node included),
so the model below includes the probabilities (``prob_tokens`` = 4096) and the efficiency is the kernel's own.

- NVLink only (GB200, EP 8/16/24/32/36 in one NVL72 domain, 32 SMs, the count Megatron-Bridge's presets set:
  ``moe_hybridep_num_sms = 32``). Kernel dispatch / combine GB/s 764.03/737.13, 706.95/666.26, 665.97/639.80,
  642.23/605.15, 632.31/596.99 against the model's 804.3, 738.7, 710.6, 691.4, 683.3 (received bytes over
  ``x' (p - 1) q(p) / B_0 + alpha_0``, B_0 = 720 GB/s, x' with probabilities): ratios 0.950/0.916,
  0.957/0.902, 0.937/0.900, 0.929/0.875, 0.925/0.874; per row the harmonic mean of dispatch and combine (a
  training layer runs two of each) 0.933, 0.929, 0.918, 0.901, 0.899, mean 0.916 -> 0.92. The 16-SM rows are
  lower (harmonic means 0.89, 0.85, 0.84, 0.85, 0.84): the NVLink kernel still gains from 16 to 32 SMs, so
  the constant holds at the presets' 32, not below. DGX-B200 (8 ranks, 16 SMs, 734.95/673.84 GB/s) matches
  GB200's 16-SM row (0.914/0.838 against 0.933/0.851).
- RDMA (DGX-H100, EP 16/32/64 over 2/4/8 nodes, 4/8/16 SMs; no 32-SM row). Kernel dispatch / combine GB/s
  at 8 and 16 SMs: 76.80/68.00, 71.71/62.95 (2 nodes); 54.50/56.40, 57.69/57.46 (4); 50.55/51.03, 49.97/49.77
  (8), against the model's 92.0, 61.5, 52.7 (NIC-bound: the RDMA term is 1.4x, 3.3x, 5.4x the NVLink one).
  From 8 to 16 SMs the kernels change by -7..+6 % (mean -2 %): the NIC binds, the kernel is flat in SMs from
  8 on, so the 16-SM rows stand for the presets' 32. At 4 and 8 nodes the 16-SM ratios are 0.939/0.935 and
  0.948/0.944, harmonic means 0.937 and 0.946, mean 0.942 -> 0.94. At 2 nodes the kernels reach only
  0.78/0.69 (16 SMs) of the model: the one row where the NVLink forward (5.8 copies per token) is close to
  the NIC time, so its overlap with the RDMA stage, which the ``max`` assumes complete, is not; the model is
  faster there (by 13-37 % over the 8- and 16-SM rows), a known gap the constant does not close.

DeepEP: the published DeepEP numbers (same file, GB200 and B200) are Torch-API only, no kernel time, and at
Megatron-Core's default 20 SMs they still rise steeply with SMs (GB200 8 ranks BF16 dispatch 362.01 / 512.72 /
615.78 GB/s at 16 / 24 / 32 SMs; B200 348 / 494 / 560 / 619 / 635 at 16 / 24 / 28 / 32 / 36), so no kernel
efficiency for DeepEP follows from them. **[assumption]** The flex path prices DeepEP with HybridEP's kernel
efficiencies. DeepEP's README table (@92fe2de, H800, 24 SMs; hardware/measurements/ep_alltoall.yaml) agrees with
that price within 3 % at 4 nodes (RDMA-bound) and is 6-9 % slower inside one node (tests/test_ep_probs_counts.py).

DeepEP's bytes (strategy ``moe_flex_backend`` deepep, Megatron-Core's default): its internode kernels move each
token copy, over RDMA and again in the NVLink forward, as one slot of ``get_num_bytes_per_token`` bytes =
``align_up(hidden bytes + sizeof(SourceMeta) [8] + scales x 4 + top-k indices x 4 + top-k weights x 4, 16)``
(deepseek-ai/DeepEP @92fe2de csrc/kernels/internode.cu L42-46; the dispatch kernel's slot L520, the combine's
``get_num_bytes_per_token(hidden_int4, 0, 0, num_topk)`` L1753; the RDMA put ``num_bytes_per_token x tokens``
L813, the NVLink forward's TMA copy of ``num_bytes_per_token`` L978-983). Megatron-Core's four calls per layer
(megatron/core/transformer/moe/fused_a2a.py @d98e8a64dd): the forward dispatch passes ``topk_idx`` and
``topk_weights`` (k indices, k weights), the forward combine neither, the backward of the dispatch a combine with
the weights' gradient (k weights), the backward of the combine a cached dispatch with neither (csrc/deep_ep.cpp
@92fe2de: ``num_topk = 0`` unless the tensors are given, L1011-1016 and L1374-1382); BF16, no scales. The time is
linear in the bytes (both terms of the ``max`` scale with them, the latencies do not), so the layer's mean is one
call at the four slots' mean (:func:`deepep_mean_slot_bytes`). Inside one node DeepEP runs its intranode kernels
instead, which send the hidden state, a 4-byte source index and the top-k indices and weights unpadded
(csrc/kernels/intranode.cu); their bytes are priced with the same slot (they differ by under 4 k + 16 bytes per
token, 0.3 % of a 7168-wide BF16 row at k = 8).
"""

from __future__ import annotations

import numpy as np

from scalemodel.cost import moe_routing
from scalemodel.cost.placement import Placement

#: HybridEP's NVLink kernel bandwidth / this model's at the catalog's tier-0 efficiency, at the 32 SMs of
#: Megatron-Bridge's presets: 0.916 (GB200 EP 8-36, kernel-only BF16 dispatch and combine; module docstring).
KERNEL_EFFICIENCY_NVLINK = 0.92
#: HybridEP's RDMA-bound kernel bandwidth / this model's at the catalog's NIC efficiency: 0.942 (DGX-H100 EP 32
#: and 64 over 4 and 8 nodes, 16 SMs, flat from 8 SMs on; module docstring).
KERNEL_EFFICIENCY_RDMA = 0.94
#: Bytes of one routing probability (fp32) that HybridEP's forward dispatch copies per expert of the destination
#: domain (``intra_node_prob_buffer``, hybrid_ep_backend.cuh @94a9f8f).
PROB_BYTES = 4.0


#: Bytes of DeepEP's per-token metadata ``SourceMeta`` (its source RDMA rank and a bit per NVLink peer: two ints)
#: and of one top-k index (int) or weight (float) in its slot (csrc/kernels/internode.cu @92fe2de L17-46), and the
#: slot's alignment (``align_up(..., sizeof(int4))``).
DEEPEP_SOURCE_META_BYTES = 8.0
DEEPEP_TOPK_FIELD_BYTES = 4.0
DEEPEP_SLOT_ALIGN = 16.0


def deepep_mean_slot_bytes(row_bytes: object, top_k: object) -> np.ndarray:
    """Mean bytes per token copy over DeepEP's four calls of one MoE layer (module docstring): the slot
    ``align_up(row + 8 + 4 (n_idx + n_w), 16)`` with (n_idx, n_w) = (k, k) for the forward dispatch, (0, 0) for the
    forward combine, (0, k) for the backward combine and (0, 0) for the backward (cached) dispatch, ``row`` the
    bytes of one token's hidden state. Broadcasts."""
    r = np.asarray(row_bytes, dtype=float)
    k = np.asarray(top_k, dtype=float)

    def slot(fields: object) -> np.ndarray:
        raw = r + DEEPEP_SOURCE_META_BYTES + DEEPEP_TOPK_FIELD_BYTES * np.asarray(fields, dtype=float)
        return np.asarray(np.ceil(raw / DEEPEP_SLOT_ALIGN - 1e-9) * DEEPEP_SLOT_ALIGN)

    return np.asarray((slot(2.0 * k) + 2.0 * slot(0.0) + slot(k)) / 4.0)


def part_hit_probability(experts: object, top_k: object, parts: object) -> np.ndarray:
    """q(n) = 1 - C(E - E/n, k) / C(E, k): the probability that one of ``parts`` equal groups of the ``experts``
    holds at least one of a token's ``top_k`` experts (drawn uniformly without replacement). Broadcasts over all
    three; n = 1 gives 1 (k >= 1), k = 0 gives 0."""
    E = np.asarray(experts, dtype=float)
    k = np.asarray(top_k, dtype=float)
    n = np.maximum(np.asarray(parts, dtype=float), 1.0)
    out_e = E - E / n  # experts outside the group
    miss = np.ones(np.broadcast_shapes(E.shape, k.shape, n.shape))
    kmax = int(np.max(k)) if k.size else 0
    for i in range(kmax):
        f = np.maximum(out_e - i, 0.0) / np.maximum(E - i, 1.0)
        miss = miss * np.where(i < k, f, 1.0)
    return np.asarray(1.0 - miss)


def hierarchical_bytes(token_bytes: object, experts: object, top_k: object, ranks: object,
                       ranks_per_domain: object, etp: object = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(inter-domain, intra-domain) bytes one rank sends in one hierarchical dispatch (or combine) of
    ``token_bytes`` (its tokens x hidden x bytes per element): ``x (D - 1) q(D)`` and ``x (p - D) q(p)``
    with ``D = ranks / ranks_per_domain`` (module docstring). Broadcasts.

    Where ``G`` does not divide ``p`` (the kernels refuse such a group: DeepEP csrc/config.hpp @92fe2de asserts
    ``num_ranks < NUM_MAX_NVL_PEERS or num_ranks % NUM_MAX_NVL_PEERS == 0``, but a planner candidate may have one),
    the group is ``F = floor(p / G)`` whole domains and one of ``r = p - F G`` ranks, seen from a rank of a whole
    domain as the placement's ``c_i`` are: inter ``x ((F - 1) q(p/G) + q(p/r))`` (the partial domain holds
    ``E r / p`` experts), intra ``x (p - F - 1) q(p)`` (one forwarder per domain). Equal to the above when G | p.

    ``etp`` > 1: the group is the flex dispatcher's etp x ep ranks (``ranks`` = etp ep), each expert's etp slices on
    consecutive ranks, so a rank is hit with ``q(p / etp)``, its EP index's share of the real experts (module
    docstring); the domains' ``q`` is unchanged."""
    x = np.asarray(token_bytes, dtype=float)
    p = np.asarray(ranks, dtype=float)
    G = np.clip(np.asarray(ranks_per_domain, dtype=float), 1.0, None)
    G = np.minimum(G, np.maximum(p, 1.0))
    whole = np.maximum(np.floor(p / G + 1e-9), 1.0)  # whole domains, the own one among them
    rest = np.maximum(p - whole * G, 0.0)  # ranks in a last, partial domain
    rest = np.where(rest > 1e-9 * np.maximum(p, 1.0), rest, 0.0)
    partial = rest > 0
    q_rest = part_hit_probability(experts, top_k, np.where(partial, p / np.where(partial, rest, 1.0), 1.0))
    domains = whole + partial
    inter = x * ((whole - 1.0) * part_hit_probability(experts, top_k, p / G) + np.where(partial, q_rest, 0.0))
    per_rank = p / np.clip(np.asarray(etp, dtype=float), 1.0, None)  # EP indices: a rank's part of the experts
    intra = x * np.maximum(p - domains, 0.0) * part_hit_probability(experts, top_k, per_rank)
    return np.asarray(inter), np.asarray(intra)


def cyclic_hierarchical(token_bytes: object, experts: object, top_k: object, ranks: object,
                        ranks_per_domain: object, etp: object = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                               np.ndarray]:
    """(inter-domain bytes, intra-domain bytes, inter load factor, intra load factor) of one hierarchical dispatch
    (or combine) under NeMo Automodel's cyclic ``FakeBalancedGate`` routing (training.moe_routing cyclic;
    :func:`scalemodel.cost.moe_routing.cyclic_part_hits`: a token's experts are k consecutive ones, the same
    pattern on every rank). With ``h_D`` the mean domains a token hits (of ``D = floor(p / G)`` whole domains) and
    ``h_I`` the mean EP indices it hits (of ``p / etp``), a rank's token crosses RDMA once to each hit domain but
    its own, and is forwarded over NVLink to each of the ``etp h_I`` GPUs it hits but the forwarder (the sender's
    own local rank in each domain), averaged over the senders' local ranks::

        inter = x h_D (D - 1) / D,        intra = x etp h_I (G - 1) / G

    (the random routing's ``h_D = D q(D)`` and ``h_I = (p / etp) q(p / etp)`` give :func:`hierarchical_bytes`
    exactly). The load factors are the busiest part's hit frequency over the mean's (1 where the windows cover the
    parts evenly, as they do whenever a part holds a whole number of the windows' gcd(k, E) steps). Broadcasts."""
    x = np.asarray(token_bytes, dtype=float)
    p = np.maximum(np.asarray(ranks, dtype=float), 1.0)
    G = np.minimum(np.clip(np.asarray(ranks_per_domain, dtype=float), 1.0, None), p)
    D = np.maximum(np.floor(p / G + 1e-9), 1.0)
    u = np.clip(np.asarray(etp, dtype=float), 1.0, None)
    h_d, f_d = moe_routing.cyclic_part_hits(experts, top_k, D)
    h_i, f_i = moe_routing.cyclic_part_hits(experts, top_k, p / u)
    inter = x * h_d * (D - 1.0) / D
    intra = x * u * h_i * (G - 1.0) / G
    return np.asarray(inter), np.asarray(intra), np.asarray(f_d), np.asarray(f_i)


def hierarchical_load_factors(tokens: object, experts: object, top_k: object, ranks: object,
                              ranks_per_domain: object, etp: object = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(inter-domain, intra-domain) expected busiest receiver's bytes over the mean of one hierarchical dispatch
    under uniform random top-k routing, ``tokens`` per rank (:func:`scalemodel.cost.moe_routing.distinct_load_factor`):
    the RDMA receiver (domain d, local rank i) counts the ``(D - 1) tokens`` of its peers (the same local rank in the
    other domains) that hit domain d (one of D parts), over the p receivers; the NVLink receiver counts the
    ``(p - D) tokens`` of the other local ranks that hit its EP index's experts (one of ``p / etp`` parts), over the
    ``p / etp`` EP indices (an index's etp ranks receive the same tokens). Whole domains (D = floor(p / G)).
    Broadcasts; (1, 1) for one rank."""
    n = np.asarray(tokens, dtype=float)
    p = np.maximum(np.asarray(ranks, dtype=float), 1.0)
    G = np.minimum(np.clip(np.asarray(ranks_per_domain, dtype=float), 1.0, None), p)
    D = np.maximum(np.floor(p / G + 1e-9), 1.0)
    idx = p / np.clip(np.asarray(etp, dtype=float), 1.0, None)  # EP indices
    inter = moe_routing.distinct_load_factor((D - 1.0) * n, experts, top_k, D, p)
    intra = moe_routing.distinct_load_factor(np.maximum(p - D, 0.0) * n, experts, top_k, idx, idx)
    return inter, intra


def hierarchical_alltoall_time(token_bytes: object, experts: object, top_k: object, pl: Placement,
                               prob_tokens: object = 0.0, etp: object = 1.0, tokens: object = 0.0,
                               imbalance: object = 0.0, routing: str = "random") -> np.ndarray:
    """Seconds of one hierarchical dispatch (or combine) on the EP group ``pl``: the bytes of
    :func:`hierarchical_bytes` with the domain = the group's ranks inside one tier-0 domain (``c_0``), each copy
    carrying ``prob_tokens * PROB_BYTES * E / D`` bytes of routing probabilities besides ``token_bytes``, priced
    ``max(intra / (eta_nvl B_0), sum_i inter_i / (eta_rdma B_i))`` plus one hop latency of tier 0 and of the
    outermost tier crossed (module docstring). 0 for a single rank. ``etp`` > 1: ``pl`` is the etp x ep group,
    a rank is hit as its EP index is and the probabilities are ``etp E / D`` floats (module docstring).
    The busiest receiver: ``imbalance`` >= 1 (a measured max / mean) scales both terms' bytes, each at most its
    stage's :func:`scalemodel.cost.moe_routing.distinct_load_cap` (every source token); else ``tokens`` > 0
    (the rank's tokens per dispatch) scales them by :func:`hierarchical_load_factors`; neither: the mean.
    ``routing`` cyclic (training.moe_routing; Automodel's FakeBalancedGate): the bytes and load factors of
    :func:`cyclic_hierarchical` instead of the random routing's (a stated ``imbalance`` still wins, capped at that
    routing's every-source-token bound, n / h_n for n parts each hit by h_n / n of the tokens)."""
    p = pl.p
    G = np.maximum(pl.c[0], 1.0)
    D = np.maximum(p / np.minimum(G, np.maximum(p, 1.0)), 1.0)
    x = np.asarray(token_bytes, dtype=float) \
        + np.asarray(prob_tokens, dtype=float) * PROB_BYTES * np.asarray(etp, dtype=float) \
        * np.asarray(experts, dtype=float) / D
    if routing == "cyclic":
        inter, intra, f_inter, f_intra = cyclic_hierarchical(x, experts, top_k, p, G, etp)
    else:
        inter, intra = hierarchical_bytes(x, experts, top_k, p, G, etp)
        f_inter, f_intra = hierarchical_load_factors(tokens, experts, top_k, p, G, etp)
    given = np.asarray(imbalance, dtype=float)
    # a stated figure, at most what one receiver can take (every source token hitting its part, 1 / q)
    idx = p / np.clip(np.asarray(etp, dtype=float), 1.0, None)  # EP indices
    if routing == "cyclic":  # every source token, against the mean part's share h_n / n of them
        whole = np.maximum(np.floor(p / np.minimum(G, np.maximum(p, 1.0)) + 1e-9), 1.0)
        h_d, h_i = moe_routing.cyclic_part_hits(experts, top_k, whole)[0], moe_routing.cyclic_part_hits(
            experts, top_k, idx)[0]
        cap_inter = np.where(whole > 1, whole / np.maximum(h_d, 1e-12), 1.0)
        cap_intra = np.where(idx > 1, idx / np.maximum(h_i, 1e-12), 1.0)
    else:
        cap_inter = moe_routing.distinct_load_cap(experts, top_k, D)
        cap_intra = moe_routing.distinct_load_cap(experts, top_k, idx)
    inter = inter * np.where(given >= 1.0, np.minimum(given, cap_inter), f_inter)
    intra = intra * np.where(given >= 1.0, np.minimum(given, cap_intra), f_intra)
    remote_domains = np.maximum(p / G - 1.0, 0.0)
    nvl = intra / (pl.bw[0] * KERNEL_EFFICIENCY_NVLINK)
    nic = np.zeros(np.broadcast(x, p).shape)
    lat = np.where(G > 1.0 + 1e-9, pl.alpha[0], 0.0)
    outer = np.zeros_like(nic)
    for i in range(1, pl.ntiers):
        peers = pl.c[i] - pl.c_prev(i)  # group ranks across tier i (not inside the tier below)
        share = peers / G  # remote domains across tier i
        frac = np.divide(share, remote_domains, out=np.zeros(np.broadcast(share, remote_domains).shape),
                         where=remote_domains > 0)
        nic = nic + inter * frac / (pl.bw[i] * KERNEL_EFFICIENCY_RDMA)
        outer = np.where(peers > 0.5, np.maximum(outer, pl.alpha[i]), outer)
    t = np.maximum(nvl, nic) + lat + outer
    return np.asarray(np.where(p > 1, t, 0.0))
