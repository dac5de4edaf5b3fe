"""Load imbalance of MoE token routing across expert-parallel ranks: the busiest rank's load over the mean.

An MoE layer waits for its busiest EP rank: the combine all-to-all cannot finish before the most-loaded rank has
run its experts, and that rank also receives (dispatch) and sends back (combine) the most token copies. The
rest of the step model prices every rank at the mean, ``T k / ep`` routed copies per rank for ``T`` tokens in the
EP group's dispatch; this module gives the factor ``max / mean`` (docs/model.md#moe-rank-imbalance).

Routing. Megatron-Core's ``moe_router_force_load_balancing`` (set by the Megatron-Bridge performance recipes and
Megatron-LM's moe recipes that the validation rows run) replaces the router's logits by
``logits.clone().normal_()`` (``RandomSTE``, NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_utils.py
@d98e8a64dd L1258-1279, called from ``TopKRouter.forward``, router.py L861-863; the same at @002255075c,
moe_utils.py L1158, router.py L725; at 0d8e0714cd, Megatron-Bridge 25.11's, a per-rank generator whose last eager
draw a CUDA graph of the router replays, moe_utils.py L901-928): i.i.d. normal logits per token, so the top-k of
each token is a uniformly random k-subset of the E experts (k DISTINCT experts), independently of the other tokens.
The step's wait for the slowest of several EP groups is not priced (under 0.31 % of the routed experts' time at
the validation rows' shapes even for independent, frozen groups: docs/model.md#moe-rank-imbalance). That is the default
here: the random-routing baseline, not a measured figure. A learned router, even with an auxiliary
load-balancing loss, is typically less balanced than this; a measured max/mean can be given instead
(training.moe_rank_imbalance).

Copies per rank (expert compute, NCCL all-to-all bytes). Rank r holds m = E/p of the E experts (p EP ranks).
One token puts ``Y_r`` = |its k experts within rank r's m| copies on rank r: a multivariate hypergeometric vector
over the p ranks with

    E[Y_r] = k/p,  Var Y_r = k (1/p)(1 - 1/p)(E - k)/(E - 1),  Cov(Y_r, Y_s) = -k (1/p)^2 (E - k)/(E - 1)

(sampling k of E without replacement; Johnson, Kotz & Balakrishnan, Discrete Multivariate Distributions, 1997,
ch. 39), so the pairwise correlation is exactly -1/(p - 1) and ``Var(Y_r - Y_s)/2 = k (1/p)(E - k)/(E - 1)``.
The rank's load ``X_r`` sums ``N`` independent tokens: mean ``mu = N k / p``, and by the central limit theorem the
vector (X_r) is close to an exchangeable Gaussian with the same covariance. For any exchangeable Gaussian vector
``X_r = mu + s (Z_r - c Zbar)`` the expected maximum is ``mu + s_d e_p`` with ``s_d^2 = Var(X_r - X_s)/2`` and
``e_p = E[max of p i.i.d. N(0, 1)]`` (the common part does not move the argmax): here ``s_d^2 = mu (E - k)/(E - 1)``,

    f_copies = E[max_r X_r] / mu = 1 + e_p sqrt((E - k) / ((E - 1) mu))

(the union-of-draws correlation is what the sqrt(1 - 1/p) of a marginal-sd estimate leaves out). e_p is exact
(:func:`scalemodel.cost.stragglers.expected_max_step`, Gauss-Hermite order statistics): 0, 0.5642, 1.0294,
1.4236, 1.7660, 2.0697, 2.3437 at p = 1, 2, 4, 8, 16, 32, 64. Capped at the largest possible load,
``min(k, m) N`` copies, i.e. ``f <= p min(k, m) / k``.

Error. The Gaussian step leaves out the load's skewness ``gamma`` (about ``1 / sqrt(mu)``, a sum of rare counts);
the Cornish-Fisher correction of the upper quantiles moves the expected maximum's excess by about
``gamma (E[Z_(p)^2] - 1) / (6 e_p)`` of itself, 0.16 gamma at p = 8 and 0.35 gamma at p = 64: under 0.5 % of the
excess (not of the load) at the validation rows' mu >= 4096, about 3 % at mu = 128. The normal form is slightly
low (the load's right tail is heavier); tests/test_moe_routing_imbalance.py checks it against a Monte Carlo of
normal logits and top-k within 4 standard errors plus ``0.5 / sqrt(mu)`` of the excess.

Distinct tokens per part (DeepEP / HybridEP bytes). The hierarchical dispatchers move a token once per
destination part hit (a domain over RDMA, a GPU over NVLink; docs/model.md#ep-hierarchical), so a receiver's
load counts the distinct tokens hitting its part. With ``a = P(a token misses a part) = C(E - E/n, k) / C(E, k)``
and ``b = P(misses two given parts) = C(E - 2 E/n, k) / C(E, k)`` (n equal parts), one token's hit indicators have
``Var(I_r - I_s)/2 = a - b``, so over ``n_t`` source tokens per receiver (mean ``n_t q``, q = 1 - a)

    f_distinct = 1 + e_R sqrt((a - b) / n_t) / q          (R receivers; capped at 1 / q)

exact for receivers counting the same tokens (the Gaussian step as above); where their source tokens only
overlap (a domain's RDMA receivers each count their own peers' tokens) the true spread lies between the marginal
``sqrt(q (1 - q))`` and ``sqrt(a - b)`` (a - b = q (1 - q) - (b - a^2), b - a^2 <= 0 here), so the form is an upper
estimate: by 5 % of the excess for 8 domains, E 128, k 4, and by well under 1 % at the rank level (m = E/p small).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from scalemodel.cost import stragglers

Array = Any  # float or numpy array


def expected_max_standard_normal(n: Array) -> np.ndarray:
    """e_n = E[max of n i.i.d. N(0, 1)], n >= 1 (0 at n = 1), exact by the order-statistic quadrature of
    :func:`scalemodel.cost.stragglers.expected_max_step` (memoised per distinct n). Broadcasts."""
    nn = np.maximum(np.asarray(n, dtype=float), 1.0)
    return np.asarray(stragglers.expected_max_step(1.0, 1.0, nn, "normal") - 1.0)


def miss_probability(experts: Array, top_k: Array, out: Array) -> np.ndarray:
    """C(E - out, k) / C(E, k) = prod_(i<k) (E - out - i) / (E - i): the probability that a token's k distinct
    experts (a uniform k-subset of E) all avoid a given set of ``out`` experts. Broadcasts; k = 0 gives 1."""
    E = np.asarray(experts, dtype=float)
    k = np.asarray(top_k, dtype=float)
    o = np.asarray(out, dtype=float)
    p = np.ones(np.broadcast_shapes(E.shape, k.shape, o.shape))
    for i in range(int(np.max(k)) if k.size else 0):
        p = p * np.where(i < k, np.maximum(E - o - i, 0.0) / np.maximum(E - i, 1.0), 1.0)
    return np.asarray(p)


def copy_load_cap(experts: Array, top_k: Array, ranks: Array) -> np.ndarray:
    """The most routed copies one of ``ranks`` EP ranks can take over the mean: every token puts at most
    min(k, E/p) of its k copies on one rank's E/p experts, so max / mean <= p min(k, E/p) / k (1 at p <= 1 or
    k < 1). A stated figure (training.moe_rank_imbalance) above it is priced at it. Broadcasts."""
    E = np.asarray(experts, dtype=float)
    k = np.asarray(top_k, dtype=float)
    p = np.maximum(np.asarray(ranks, dtype=float), 1.0)
    cap = p * np.minimum(k, E / p) / np.maximum(k, 1.0)
    return np.asarray(np.where((p > 1) & (k >= 1), np.maximum(cap, 1.0), 1.0))


def distinct_load_cap(experts: Array, top_k: Array, parts: Array) -> np.ndarray:
    """The most distinct tokens one receiver of one of ``parts`` equal groups of the experts can take over the
    mean: every source token, against a mean of q of them, ``1 / q`` with q = 1 - C(E - E/n, k) / C(E, k) (1 for
    one part). Broadcasts."""
    E = np.asarray(experts, dtype=float)
    n = np.maximum(np.asarray(parts, dtype=float), 1.0)
    q = 1.0 - miss_probability(E, top_k, E / n)
    return np.asarray(np.where((n > 1) & (q > 0), 1.0 / np.where(q > 0, q, 1.0), 1.0))


def copy_load_factor(mean_copies: Array, experts: Array, top_k: Array, ranks: Array) -> np.ndarray:
    """Expected busiest EP rank's routed token copies over the mean, under uniform random top-k routing (module
    docstring): ``1 + e_p sqrt((E - k) / ((E - 1) mu))``, ``mu`` = ``mean_copies`` per rank, p = ``ranks`` (each
    holding E/p experts), capped at ``p min(k, E/p) / k``. 1 where p <= 1, E <= 1, k >= E or mu <= 0. Broadcasts."""
    mu = np.asarray(mean_copies, dtype=float)
    E = np.asarray(experts, dtype=float)
    k = np.asarray(top_k, dtype=float)
    p = np.maximum(np.asarray(ranks, dtype=float), 1.0)
    ok = (p > 1) & (E > 1) & (k >= 1) & (k < E) & (mu > 0)
    spread = np.where(ok, (E - k) / np.where(ok, (E - 1.0) * mu, 1.0), 0.0)
    f = 1.0 + expected_max_standard_normal(p) * np.sqrt(spread)
    return np.asarray(np.where(ok, np.minimum(f, copy_load_cap(E, k, p)), 1.0))


def distinct_load_factor(source_tokens: Array, experts: Array, top_k: Array, parts: Array,
                         receivers: Array) -> np.ndarray:
    """Expected busiest receiver's distinct tokens over the mean when each of ``receivers`` counts, over
    ``source_tokens`` tokens, those hitting its part (one of ``parts`` equal groups of the experts) at least once:
    ``1 + e_R sqrt((a - b) / n_t) / q`` (module docstring), capped at 1/q. 1 where R <= 1, one part, or no
    tokens. Broadcasts."""
    n_t = np.asarray(source_tokens, dtype=float)
    E = np.asarray(experts, dtype=float)
    n = np.maximum(np.asarray(parts, dtype=float), 1.0)
    R = np.maximum(np.asarray(receivers, dtype=float), 1.0)
    a = miss_probability(E, top_k, E / n)
    b = miss_probability(E, top_k, 2.0 * E / n)
    q = 1.0 - a
    ok = (R > 1) & (n > 1) & (n_t > 0) & (q > 0)
    qs = np.where(ok, q, 1.0)
    f = 1.0 + expected_max_standard_normal(R) * np.sqrt(np.maximum(a - b, 0.0) / np.where(ok, n_t, 1.0)) / qs
    return np.asarray(np.where(ok, np.minimum(f, 1.0 / qs), 1.0))


#: The routing patterns the step model prices (training.moe_routing): ``random``, the uniform random top-k above
#: (Megatron-Core's moe_router_force_load_balancing); ``cyclic``, NeMo Automodel's ``FakeBalancedGate`` with noise 0
#: (:func:`cyclic_part_hits`).
ROUTINGS = ("random", "cyclic")


@functools.lru_cache(maxsize=4096)
def _cyclic_hits(experts: int, top_k: int, parts: int) -> tuple[float, float]:
    """(mean parts hit per token, busiest part's hit frequency / the mean part's) of the cyclic routing
    (:func:`cyclic_part_hits`) on integers, by enumerating the ``E / gcd(k, E)`` window starts of one period."""
    E, k, n = experts, min(top_k, experts), max(min(parts, experts), 1)
    starts = np.arange(0, E, math.gcd(k, E))  # t k mod E over one period of t: the multiples of gcd(k, E)
    window = (starts[:, None] + np.arange(k)[None, :]) % E  # each start's k experts
    part = window * n // E  # expert e in part floor(e n / E): n equal parts where n | E
    hit = np.zeros((starts.size, n), dtype=bool)
    hit[np.arange(starts.size)[:, None], part] = True
    freq = hit.mean(axis=0)  # how often each part is hit, over the period
    mean = float(freq.mean())
    return float(hit.sum(axis=1).mean()), float(freq.max() / mean) if mean > 0 else 1.0


def cyclic_part_hits(experts: Array, top_k: Array, parts: Array) -> tuple[np.ndarray, np.ndarray]:
    """NeMo Automodel's ``FakeBalancedGate`` (noise 0): token t of a rank's micro-batch goes to experts
    ``(t k + j) mod E``, j < k, whatever the rank (NVIDIA-NeMo/Automodel nemo_automodel/components/moe/layers.py
    @89e3a9fdd L544-546: ``indices = torch.arange(x.size(0) * a_exp).view(-1, a_exp) % n_exp``; the same at
    @bb0c0bfb0 L183-186 with skip_first_n_experts 0). A token's experts are one cyclic window of k consecutive
    experts starting at ``s = t k mod E``, and s runs over the multiples of ``gcd(k, E)``, each equally often over a
    period of ``E / gcd(k, E)`` tokens. Of ``parts`` equal groups of the experts (expert e in group
    ``floor(e n / E)``) this returns, over one period, the mean number of groups a token hits (the random routing's
    ``n q(n)``, :func:`scalemodel.cost.ep_dispatch.part_hit_probability`) and the busiest group's hit frequency over
    the mean group's (the distinct-token load factor; 1 where the windows cover the groups evenly). Micro-batches
    that are not whole periods are priced at the period's mean. Integers (E, k, n rounded); broadcasts over
    ``parts``."""
    E, k = int(round(float(np.max(experts)))), int(round(float(np.max(top_k))))
    n = np.asarray(parts, dtype=float)
    if E < 1 or k < 1:
        return np.zeros(n.shape), np.ones(n.shape)
    flat = np.rint(np.maximum(n, 1.0)).astype(int).ravel()
    pairs = [_cyclic_hits(E, k, int(v)) for v in flat]
    hits = np.array([h for h, _ in pairs], dtype=float).reshape(n.shape)
    busy = np.array([f for _, f in pairs], dtype=float).reshape(n.shape)
    return hits, busy
