"""Statistical efficiency vs global batch size: gradient noise scale and critical batch.

Reference: docs/model.md#statistical-efficiency.

McCandlish, Kaplan, Amodei et al., "An Empirical Model of Large-Batch Training" (arXiv 1812.06162):
with B_noise the gradient noise scale, reaching a target loss at global batch B takes

    S = S_min (1 + B_noise / B)   optimisation steps,
    E = E_min (1 + B / B_noise)   training examples,    i.e. (S/S_min - 1)(E/E_min - 1) = 1,

and E_min = S_min * B_noise. At B = B_crit ~= B_noise both are twice their minimum.

Kaplan et al., "Scaling Laws for Neural Language Models" (arXiv 2001.08361, section 5.1):
B_crit(L) = B* / L^(1/alpha_B) tokens with B* ~= 2e8 tokens and alpha_B ~= 0.21 (L in nats/token).
Fit on WebText2-era losses: extrapolating to other tokenizers and data is unsafe (docs/model.md#statistical-efficiency).

Pollux (Qiao et al., OSDI 2021): GOODPUT = THROUGHPUT x EFFICIENCY, with efficiency relative to a
reference batch M0: (B_noise + M0) / (B_noise + M), taken at M >= M0 only (M0 is the job's initial batch, the
smallest it runs: petuum/adaptdl@de25dcc9 adaptdl/adaptdl/goodput.py, GoodputFunction.evaluate asserts
init_batch_size <= batch_size and optimize searches from it up). The "examples" form,
E_min/E = 1/(1 + B/B_noise), is the M0 -> 0 limit: the useful fraction of each example. Both are relative to a
batch no larger than B, so in (0, 1]; a reference above B is refused (it would read as more than all of a
sequence's progress).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalemodel.errors import InputError

Array = Any

KAPLAN_B_STAR_TOKENS = 2.0e8  # Kaplan et al. 2020, section 5.1 (via secondary restatements)
KAPLAN_ALPHA_B = 0.21  # Kaplan et al. 2020, section 5.1 (via secondary restatements)
KAPLAN_N_C = 8.8e13  # Kaplan et al. 2020, eq. (1.1): L(N) = (N_c / N)^alpha_N, N non-embedding parameters
KAPLAN_ALPHA_N = 0.076  # Kaplan et al. 2020, eq. (1.1)


def _pos(x: Array, name: str, allow_zero: bool = False) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    bad = (a < 0) if allow_zero else (a <= 0)
    if np.any(bad) or not np.all(np.isfinite(a)):
        raise InputError(f"{name} is {x!r}", where=name, allowed=f"finite values {'>= 0' if allow_zero else '> 0'}")
    return a


def steps_to_target(s_min: Array, batch: Array, b_noise: Array) -> np.ndarray:
    """S = S_min (1 + B_noise / B) (McCandlish et al. 2018)."""
    return _pos(s_min, "s_min") * (1 + _pos(b_noise, "b_noise") / _pos(batch, "batch"))


def examples_to_target(e_min: Array, batch: Array, b_noise: Array) -> np.ndarray:
    """E = E_min (1 + B / B_noise) (McCandlish et al. 2018)."""
    return _pos(e_min, "e_min") * (1 + _pos(batch, "batch") / _pos(b_noise, "b_noise"))


def statistical_efficiency(batch: Array, b_noise: Array, ref_batch: Array = 0.0) -> np.ndarray:
    """Per-example efficiency (B_noise + M0)/(B_noise + B) (Pollux), M0 <= B so in (0, 1]; M0 = 0 gives E_min/E."""
    m0 = _pos(ref_batch, "ref_batch", allow_zero=True)
    bn = _pos(b_noise, "b_noise")
    b = _pos(batch, "batch")
    if np.any(m0 > b):
        raise InputError(f"ref_batch {ref_batch!r} is above the batch {batch!r}", where="ref_batch",
                         allowed="a reference batch no larger than the batch (the smallest batch compared, or 0)")
    return (bn + m0) / (bn + b)


def critical_batch_kaplan(loss: Array, b_star: Array = KAPLAN_B_STAR_TOKENS,
                          alpha_b: Array = KAPLAN_ALPHA_B) -> np.ndarray:
    """B_crit(L) = B* / L^(1/alpha_B) tokens (Kaplan et al. 2020, section 5.1)."""
    return _pos(b_star, "b_star") / _pos(loss, "loss") ** (1 / _pos(alpha_b, "alpha_b"))


def kaplan_loss(non_embedding_params: Array, n_c: Array = KAPLAN_N_C, alpha_n: Array = KAPLAN_ALPHA_N) -> np.ndarray:
    """L(N) = (N_c / N)^alpha_N nats/token (Kaplan et al. 2020 eq. 1.1: converged loss of a model with N
    non-embedding parameters trained on enough WebText2 data)."""
    return (_pos(n_c, "n_c") / _pos(non_embedding_params, "params")) ** _pos(alpha_n, "alpha_n")


def default_critical_batch_tokens(non_embedding_params: Array) -> np.ndarray:
    """The documented default B_noise of a language model: B_crit(L(N)) tokens (Kaplan et al. 2020 §5.1 at
    the eq. 1.1 loss). A WebText2-era fit: an order-of-magnitude default, not a measurement of the workload."""
    return critical_batch_kaplan(kaplan_loss(non_embedding_params))


def time_to_target(s_min: Array, batch: Array, b_noise: Array, step_time_s: Array,
                   sync_efficiency: Array = 1.0) -> np.ndarray:
    """Seconds to the target: S(B) * t_step / sync_efficiency (the staleness multiplier of
    :mod:`scalemodel.cost.sync`, 1 for synchronous training)."""
    eff = np.asarray(sync_efficiency, dtype=float)
    if np.any((eff <= 0) | (eff > 1)) or not np.all(np.isfinite(eff)):
        raise InputError("a sync efficiency is outside (0, 1]", where="sync_efficiency", allowed="values in (0, 1]")
    return steps_to_target(s_min, batch, b_noise) * _pos(step_time_s, "step_time_s") / eff


def goodput(samples_per_s: Array, batch: Array, b_noise: Array, ref_batch: Array = 0.0,
            sync_efficiency: Array = 1.0) -> np.ndarray:
    """Pollux goodput = throughput x statistical efficiency (x sync efficiency): useful samples/s,
    measured in E_min-equivalents when ref_batch = 0."""
    eff = np.asarray(sync_efficiency, dtype=float)
    if np.any((eff <= 0) | (eff > 1)) or not np.all(np.isfinite(eff)):
        raise InputError("a sync efficiency is outside (0, 1]", where="sync_efficiency", allowed="values in (0, 1]")
    return _pos(samples_per_s, "samples_per_s", allow_zero=True) * statistical_efficiency(
        batch, b_noise, ref_batch) * eff


def noise_scale_from_norms(b_small: Array, b_big: Array, g2_small: Array, g2_big: Array) -> np.ndarray:
    """B_simple = tr(Sigma)/|G|^2 from squared gradient norms at two batch sizes (McCandlish App. A):
    |G|^2 ~= (B_big |G_big|^2 - B_small |G_small|^2)/(B_big - B_small),
    tr(Sigma) ~= (|G_small|^2 - |G_big|^2)/(1/B_small - 1/B_big). Smooth the inputs (EMA) first."""
    bs, bb = _pos(b_small, "b_small"), _pos(b_big, "b_big")
    if np.any(bb <= bs):
        raise InputError("b_big is not larger than b_small", where="b_big", allowed="b_big > b_small")
    gs, gb = _pos(g2_small, "g2_small", True), _pos(g2_big, "g2_big", True)
    g2 = (bb * gb - bs * gs) / (bb - bs)
    tr = (gs - gb) / (1 / bs - 1 / bb)
    if np.any(g2 <= 0) or np.any(tr < 0):
        raise InputError("gradient norms give a non-positive |G|^2 or negative tr(Sigma) (too noisy)",
                         where="noise_scale", allowed="smoothed norms with |G_small|^2 >= |G_big|^2")
    return tr / g2
