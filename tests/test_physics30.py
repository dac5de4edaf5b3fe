"""Tier bounds on the whole step, and the reach of the shared physics generator (hypothesis; issue 13, prop30).

tests/test_physics_wide.py's ``wide_cases`` is the one builder of random candidates; the tests here narrow its draws
(a few fields overridden, never a builder of their own) to where a bound is computed by hand:

- the host link: every offloaded byte crosses it once each way per micro-batch, so the step takes at least the bytes
  one direction carries over ``host_bandwidth`` (offload_layers: Megatron-Core / TE cpu_offload; offload_tensors:
  MaxText's named tensors);
- every tier a pure data-parallel group crosses, the DCN of a TPU multislice included: each child domain sends at
  least (n - 1) / n of the 16-bit gradients out through its c uplinks (the reduce-scatter half of any all-reduce,
  ZeRO-1/2's reduce-scatter), so step >= (n - 1) / n 2 P / (c B);
- every tier the EP token exchange crosses (NCCL all-to-all, DeepEP / HybridEP, the allgather dispatcher): each
  rank sends its tokens at least once to every remote NVLink domain holding one of their experts, four exchanges a
  MoE layer and micro-batch (dispatch and combine, forward and backward), at least one byte an element.

Each bound is the bytes that must cross a tier divided by the tier's per-GPU line rate, whatever overlap hides: a
link busy for t seconds keeps the step at least t long.
"""

from __future__ import annotations

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scalemodel.engine.job import StrategyGrid
from scalemodel.engine.network import build_network
from scalemodel.engine.step import Infeasible
from scalemodel.specs import load_cluster
from scalemodel.specs.training import OFFLOAD_TENSORS, TrainingSpec
from tests.conftest import ROOT
from tests.test_physics import _crossings, _scaled_network
from tests.test_physics_wide import (
    TRAINING_NOT_DRAWN,
    TRAINING_OPTIONS,
    WIDE_CLUSTERS,
    _eval,
    _hit,
    _wide_job,
    wide_cases,
)

#: the links' bandwidth scaled by these factors: at the shipped rates the compute dominates most steps and a bound
#: holds by a wide margin (the gradients' bound is ~5 % of the step); on a link 100x or 10,000x slower the bytes
#: dominate and the bound is sharp
SLOWER = (1.0, 1e-2, 1e-4)
BOUND = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.filter_too_much])


# --- reach: every strategy field, training option and accelerator family is drawn ----------------------------------

@settings(max_examples=1, deadline=None, database=None)
@given(wide_cases())
def test_the_shared_generator_draws_every_strategy_field(case) -> None:  # type: ignore[no-untyped-def]
    """wide_cases sets every StrategyGrid field (a field left to its default is never varied: before prop30
    13 fields were drawn by neither generator and 5 more only by tests/test_physics.py's narrow ``cases``),
    draws every TrainingSpec field but the listed ones, and reaches every accelerator family of the shipped clusters
    and a DCN tier (a TPU multislice)."""
    _, arrays, _ = case
    assert set(StrategyGrid.__struct_fields__) - set(arrays) == set()
    drawn = {"precision", "fp8_recipe", "seq_len", "moe_rank_imbalance", "moe_router_dtype",
             *(k for opts in TRAINING_OPTIONS for k, _ in opts)}
    assert set(TrainingSpec.__struct_fields__) - drawn - set(TRAINING_NOT_DRAWN) == set()
    shipped = {load_cluster(p.stem).accelerator.family for p in (ROOT / "hardware" / "clusters").glob("*.yaml")}
    assert shipped == {load_cluster(n).accelerator.family for n in WIDE_CLUSTERS}
    assert any(t.name == "dcn" for n in WIDE_CLUSTERS for t in build_network(load_cluster(n)).tiers)


# --- the host link --------------------------------------------------------------------------------------------------

@st.composite
def offload_cases(draw):  # type: ignore[no-untyped-def]
    """wide_cases at pp 1 without recompute (Megatron refuses recompute with offload) on a cluster with a host link,
    with at least one layer or one named tensor offloaded; not a hybrid Mamba model, whose layer offload is refused
    (Megatron-Core's MambaStack builds no offload context: tests/test_offload_hybrid.py) and whose named-tensor offload
    is too (no framework offloads a Mamba layer's tensors by name: tests/test_mem35.py)."""
    job, arrays, _ = draw(wide_cases().filter(lambda c: c[0].host_bandwidth > 0 and c[0].is_transformer
                                              and c[0].shape.hybrid is None))
    tensors = draw(st.sampled_from((0, 0, 1, 6, 31)))
    arrays = dict(arrays, pp=1, gpus=arrays["dp"] * arrays["tp"] * arrays["cp"], recompute=0, stage_split=-1,
                  first_stage_layers=-1, last_stage_layers=-1, first_chunk_layers=-1, last_chunk_layers=-1,
                  virtual_stages=1, schedule=0, offload_tensors=tensors,
                  offload_layers=0 if tensors else draw(st.sampled_from((1, 2, 4))))
    return job, arrays


def _tensor_bytes(job, a) -> float:  # type: ignore[no-untyped-def]
    """MaxText's named tensors per layer and micro-batch, 16-bit (dp_comm.offloaded_tensor_bytes' formula, by hand):
    b s / cp tokens of h (layer input, out_proj; / t with sequence parallelism), a d / t (query), g d / t (key),
    g d_v / t (value)."""
    sh, t = job.shape, a["tp"]
    residual = float(sh.hidden) / (t if a["sequence_parallel"] else 1)
    width = dict(decoder_layer_input=residual, query_proj=float(sh.heads * sh.head_dim) / t,
                 key_proj=float(sh.kv_heads * sh.head_dim) / t, value_proj=float(sh.kv_heads * sh.v_head_dim) / t,
                 out_proj=residual)
    per_token = sum(w for b, (n, w) in enumerate((n, width[n]) for n in OFFLOAD_TENSORS)
                    if a["offload_tensors"] >> b & 1)
    return 2.0 * a["micro_batch"] * job.seq_len / a["cp"] * per_token


#: MaxText's five named tensors of every layer over a GB200's NVLink-C2C, 10,000x slower: the copies bind
C2C_TENSORS = (_wide_job("gb200-nvl72", "llama3-8b", "bf16", None, 4096),
               dict(gpus=8, dp=8, tp=1, pp=1, cp=1, micro_batch=1, global_batch=32, offload_tensors=31,
                    offload_layers=0, sequence_parallel=False, flash_attention=True))


@BOUND
@given(offload_cases(), st.sampled_from(SLOWER))
@example(C2C_TENSORS, 1e-4)
def test_step_never_beats_the_bytes_over_the_host_link(case, slower) -> None:  # type: ignore[no-untyped-def]
    """step >= m k A / B_host: m micro-batches, k offloaded layers (every layer for named tensors), A bytes a layer
    sends to host memory, B_host the per-GPU, per-direction host link (PCIe or NVLink-C2C). Named tensors: A by hand
    (:func:`_tensor_bytes`). Whole layers: k A is what the memory model takes off the GPU for them, the activation
    peak without offload less the peak with it (one micro-batch in flight at pp 1): every byte the memory model
    counts off the GPU crosses the link, whatever the step's pricing of the copy reads (an FP8 run's quantized
    inputs, the modules' own precisions)."""
    job, a = case
    job = msgspec.structs.replace(job, host_bandwidth=job.host_bandwidth * slower)
    res = _eval(job, a)
    assert int(res.reason[0]) != int(Infeasible.OFFLOAD_INVALID), res.reason  # (a run too big for memory is priced)
    sh = job.shape
    m = a["global_batch"] / (a["dp"] * a["micro_batch"])
    if a["offload_tensors"]:
        k, per_layer = float(sh.layers), _tensor_bytes(job, a)
    else:
        kept = _eval(job, dict(a, offload_layers=0)).memory["activations"][0]
        k, per_layer = 1.0, float(kept - res.memory["activations"][0])
    bound = m * k * per_layer / job.host_bandwidth
    assert bound > 0
    assert float(res.step_time[0]) >= bound * (1 - 1e-9), (a, float(res.step_time[0]), bound)


# --- every tier a data-parallel group crosses (the DCN included) ----------------------------------------------------

@st.composite
def dp_cases(draw):  # type: ignore[no-untyped-def]
    """wide_cases as a pure data-parallel bulk-synchronous run of a dense (or generic) model: tp = pp = cp = 1, ZeRO
    0-2, no compression nor parameter servers, the group wide enough to cross the node (and on a multislice, the
    DCN)."""
    job, arrays, _ = draw(wide_cases().filter(lambda c: not (c[0].is_transformer and int(c[0].shape.moe_experts))))
    span = job.network.tiers[-1].span
    dp = draw(st.sampled_from([d for d in (16, 64, 256, 512, 1024) if d <= span] or [span]))
    arrays = dict(arrays, gpus=dp, dp=dp, tp=1, pp=1, cp=1, ep=1, global_batch=dp * arrays["micro_batch"],
                  zero=draw(st.sampled_from((0, 1, 2))), compression=0, ps_servers=0, sequence_parallel=False,
                  schedule=0, virtual_stages=1, stage_split=-1, first_stage_layers=-1, last_stage_layers=-1,
                  first_chunk_layers=-1, last_chunk_layers=-1)
    return job, arrays


#: a DP group over two TPU v5e slices: 256 chips a slice behind the DCN (drawn too rarely to be left to chance)
DCN_DP = (_wide_job("tpu-v5e-multislice", "llama3-8b", "bf16", None, 2048),
          dict(gpus=512, dp=512, tp=1, pp=1, cp=1, micro_batch=1, global_batch=512, zero=1, overlap=True))


@BOUND
@given(dp_cases(), st.sampled_from(SLOWER))
@example(DCN_DP, 1.0)
@example(DCN_DP, 1e-4)
def test_step_never_beats_the_gradients_crossing_each_tier(case, slower) -> None:  # type: ignore[no-untyped-def]
    """A data-parallel group of p consecutive ranks whose child domains of a tier hold c ranks each (n = p / c of
    them): every domain ends with the reduced gradients, so whatever the algorithm (ring, tree, hierarchical, NVLS,
    in-network reduction) it sends out at least (n - 1) / n of its P 16-bit gradients (the reduce-scatter of
    Patarasuk & Yuan's bound, JPDC 69(2) 2009, Theorem 1; ZeRO-1/2's reduce-scatter itself) through c uplinks at
    the tier's per-GPU line rate B: step >= (n - 1) / n 2 P / (c B), on the DCN of a multislice as on a leaf."""
    job, a = case
    job = _scaled_network(job, slower)
    crossings = _crossings(job.network, a["dp"], 1)
    if not crossings:
        return
    step = float(_eval(job, a).step_time[0])
    for _, outer, c, n in crossings:
        bound = (n - 1) / n * 2.0 * job.params / (c * outer.bandwidth)
        assert step >= bound * (1 - 1e-9), (a, outer.name, step, bound)


# --- every tier the EP token exchange crosses -----------------------------------------------------------------------

@st.composite
def ep_cases(draw):  # type: ignore[no-untyped-def]
    """wide_cases for an MoE model at ep = dp (tp = cp = pp = 1, one expert per EP index across consecutive ranks),
    every dispatcher."""
    job, arrays, _ = draw(wide_cases().filter(lambda c: c[0].is_transformer and int(c[0].shape.moe_experts) > 0))
    experts = int(job.shape.moe_experts)
    span = job.network.tiers[-1].span
    ep = draw(st.sampled_from([e for e in (16, 32, 64, 128, 256) if e <= span and experts % e == 0] or [1]))
    arrays = dict(arrays, gpus=ep, dp=ep, ep=ep, etp=1, tp=1, pp=1, cp=1, global_batch=ep * arrays["micro_batch"],
                  sequence_parallel=False, schedule=0, virtual_stages=1, stage_split=-1, first_stage_layers=-1,
                  last_stage_layers=-1, first_chunk_layers=-1, last_chunk_layers=-1)
    return job, arrays


@BOUND
@given(ep_cases(), st.sampled_from(SLOWER))
def test_step_never_beats_the_tokens_crossing_each_tier(case, slower) -> None:  # type: ignore[no-untyped-def]
    """A rank's x = b s tokens of width w (h, or LatentMoE's latent l) leave it for the p / G remote NVLink domains
    (G ranks each) holding one of their k experts, each hit with q = 1 - C(E - E / (p / G), k) / C(E, k): across a
    tier whose child domains hold c ranks, at least x w q (p - c) / G elements leave through the rank's uplink (the
    flex dispatchers' deduplicated volume; NCCL's all-to-all sends k copies, the allgather dispatcher every token,
    both at least this). Four such exchanges a MoE layer and micro-batch (dispatch and combine, forward and
    backward), one byte an element at least (FP8 dispatch): step >= 4 m L_moe x w q (p - c) / G / B."""
    job, a = case
    job = _scaled_network(job, slower)
    p = a["ep"]
    crossings = _crossings(job.network, p, 1)
    if p < 2 or not crossings:
        return
    sh = job.shape
    G = min(job.network.tiers[0].span, p)
    experts, k = int(sh.moe_experts), int(sh.moe_top_k)
    if experts % (p // G):
        return
    width = float(sh.moe_latent or sh.hidden)
    m = a["global_batch"] / (a["dp"] * a["micro_batch"])
    x = a["micro_batch"] * job.seq_len * width
    step = float(_eval(job, a).step_time[0])
    for _, outer, c, _n in crossings:
        bound = 4 * m * float(sh.moe_layers) * x * _hit(experts, k, p // G) * (p - c) / G / outer.bandwidth
        assert step >= bound * (1 - 1e-9), (a, outer.name, step, bound)
