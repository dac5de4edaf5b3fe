"""review36: independent checks of the model code session 35 merged (main at bc48a503).

Each expectation is computed here, not read back from the code under test: the state offload's copies by an
event-by-event simulation of DeepSpeed's gradient stream (deepspeedai/DeepSpeed@edaa7221: ZeRO-3's
``reduce_and_partition_stream`` runs a bucket's reduce-scatter, then ``partition_grads``' copies out and back, and
``independent_gradient_partition_epilogue`` synchronizes it at each backward's end, stage3.py L1591-1608,
L1886-1934, L1363-1364) and by hand; Apex's chunked parameter gather under the interleaved schedule by hand from the
schedule (Megatron-Core ``param_sync_func`` for chunks 0 and 1 at the start, for chunk j + 1 at chunk j's first
forward; Apex waits for the gathers in flight before launching another); Automodel's cyclic routing by counting
every token's experts; MaxText's einsum dispatch FLOPs by numpy's own contraction count; XLA's dead recomputed
GEMMs of a parallel block by hand; and recursive halving / doubling's folded pairs by listing every pair (MPICH's
fold, plain loops)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost import compute, moe_routing, state_offload, transformer
from scalemodel.cost.algorithms import _folded_crossings
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job, grid_from_arrays, grid_from_strategy
from scalemodel.engine.step import _chunk_time, _stage, _stage_memo
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec

# ------------------------------------------------------------------------------------------------------------------
# state offload (offload35; review36's fix): the gradient stream's copies in series behind the reductions
# ------------------------------------------------------------------------------------------------------------------


def simulate_zero3_gradient_stream(m: int, buckets: int, backward: float, reduce_mb: float, n: float, gb: float,
                                   bandwidth: float) -> float:
    """Seconds past the backwards that DeepSpeed ZeRO-3's ``reduce_and_partition_stream`` keeps the step waiting
    under offload_optimizer, simulated bucket by bucket: bucket k of micro-batch i is ready at (k + 1) / K of the
    backward; the stream runs its reduce-scatter (``reduce_mb`` / K), then ``partition_grads``' copies of its share
    of the shard ``n``: micro-step 0 ``grad_buffer.copy_`` out then ``.to(device)`` back (gb bytes each), later
    micro-steps back, add, out; at the boundary the fp32 cast out (``_offload_grad_partition_at_boundary``, 4 bytes).
    Each backward ends waiting for the stream (the epilogue's synchronize)."""
    exposed = 0.0
    for i in range(m):
        free = 0.0
        for k in range(buckets):
            start = max(free, backward * (k + 1) / buckets)
            work = reduce_mb / buckets + 2 * gb * n / buckets / bandwidth  # out and back, in series
            if i == m - 1:
                work += 4.0 * n / buckets / bandwidth
            free = start + work
        exposed += max(0.0, free - backward)
    return exposed


@pytest.mark.parametrize("m", [1, 4])
@pytest.mark.parametrize("bandwidth", [2e8, 5e9])
def test_zero3_offload_copies_match_the_stream_simulation(m: int, bandwidth: float) -> None:
    """ZeRO-3 with offload_optimizer: offload_step_seconds with C = m x backward - R (the window offloaded_optimizer
    gives it) equals the simulated stream to within the first bucket's wait (backward / K a micro-batch, K = 2000),
    in the exposed regime (0.2 GB/s) and where the copies hide (5 GB/s: 0 against the last bucket's tail)."""
    n, gb, backward, reduce_mb = 1e8, 2.0, 0.5, 0.1
    d2h, h2d, after = (float(x) for x in state_offload.host_copy_bytes(
        n, mode=1, zero=3, microbatches=m, gathers=m, weight_bytes=2.0, grad_bytes=gb))
    assert (d2h, h2d, after) == pytest.approx((n * (4 + m * gb), n * m * gb, n * 2.0))
    window = max(0.0, m * backward - m * reduce_mb)
    got = float(state_offload.offload_step_seconds(d2h, h2d, after, 0.0, bandwidth, window)) - after / bandwidth
    buckets = 2000
    sim = simulate_zero3_gradient_stream(m, buckets, backward, reduce_mb, n, gb, bandwidth)
    assert got == pytest.approx(sim, abs=m * backward / buckets + 1e-3 * sim + 1e-9)
    if bandwidth == 2e8:
        assert got > 0.5
        # the two directions priced at once (max) would miss the copies back: m gb n / B seconds
        old = max(0.0, max(d2h, h2d) / bandwidth - m * backward)
        assert sim - old > 0.9 * m * gb * n / bandwidth


def test_offload_step_seconds_by_hand() -> None:
    """Numbers by hand, B = 1 byte/s. DeepSpeed ZeRO-2 (D2H 12, H2D 6, no fetch) under C = 10: 12 + 6 - 10 = 8 (the
    max of the two directions gave 2). FSDP (D2H 16 on the reduce-scatter stream, H2D 32 all fetches) under C = 5,
    C_F = 20: max(16 - 5, 32 - 20) = 12. ZeRO-3 with offload_param (D2H 20, H2D 8 of gradients + 16 fetched), C = 4,
    C_F = 30: 28 - 4 = 24 (all 24 bytes in under C_F: 24 - 30 < 0). The CPU step and the copy back add after."""
    assert float(state_offload.offload_step_seconds(12, 6, 0, 0, 1.0, 10)) == pytest.approx(8.0)
    assert float(state_offload.offload_step_seconds(16, 32, 0, 0, 1.0, 5, 32, 20)) == pytest.approx(12.0)
    assert float(state_offload.offload_step_seconds(20, 24, 0, 0, 1.0, 4, 16, 30)) == pytest.approx(24.0)
    assert float(state_offload.offload_step_seconds(20, 24, 2, 7, 1.0, 100, 16, 100)) == pytest.approx(9.0)
    # the fetches and the copies back share the host-to-device direction: D2H 10, H2D 30 of which 20 fetched, C 5,
    # C_F 12: max(10 + 10 - 5, 20 - 12, 30 - 12) = 18
    assert float(state_offload.offload_step_seconds(10, 30, 0, 0, 1.0, 5, 20, 12)) == pytest.approx(18.0)
    # the fetched bytes: G wb at ZeRO-3 with the parameters offloaded, s G under FSDP, none otherwise
    assert float(state_offload.param_fetch_bytes(10.0, mode=2, zero=3, gathers=8, weight_bytes=2.0)) == 160.0
    assert float(state_offload.param_fetch_bytes(10.0, mode=2, zero=4, gathers=8, shard_bytes=2.0)) == 160.0
    assert float(state_offload.param_fetch_bytes(10.0, mode=1, zero=3, gathers=8)) == 0.0
    assert float(state_offload.param_fetch_bytes(10.0, mode=0, zero=4, gathers=8)) == 0.0


def test_cpu_adam_rate_by_hand() -> None:
    """DeepSpeed PR #735: 11.6e9 parameters in 8.2 s; 8 ranks of a host share it: 1e9 parameters a rank take
    8 x 1e9 x 8.2 / 11.6e9 = 5.655 s."""
    assert float(state_offload.cpu_adam_seconds(1e9, 8)) == pytest.approx(8 * 8.2 / 11.6, rel=1e-12)


# ------------------------------------------------------------------------------------------------------------------
# Apex DistributedFusedAdam's chunked parameter gather under the interleaved schedule (apexdp35)
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("forward", "expected"), [(0.3, 1.0 + 2 * 0.6), (3.0, 1.0), (0.75, 1.0)])
def test_apex_chunk_gather_by_hand(forward: float, expected: float) -> None:
    """pp 4, v 3, the stage's gather A = 3 s (a = 1 s a chunk). Chunk 1's launch at the start waits for chunk 0's
    whole gather (1 s); chunk j + 1 is launched at chunk j's first forward and waits for chunk j's gather, launched
    pp chunk-forwards (W = pp f / v) earlier: max(0, a - W) each for chunks 1 and 2. f = 0.3: W = 0.4, 1 + 2 x 0.6;
    f = 3: W = 4, 1; f = 0.75: W = 1 exactly, 1."""
    got = float(dp_comm.apex_interleaved_param_gather_exposed(3.0, forward, 4, 3))
    assert got == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------------------------------------------------------
# Automodel's FakeBalancedGate (automodel35): token t's experts (t k + j) mod E
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("experts", "top_k", "parts"), [(8, 2, 4), (10, 4, 4), (64, 6, 8), (12, 5, 3), (7, 3, 7)])
def test_cyclic_hits_by_counting_tokens(experts: int, top_k: int, parts: int) -> None:
    """Every token of 10 periods routed as ``arange(T k).view(-1, k) % E`` (Automodel layers.py), each expert's part
    floor(e n / E): the mean parts a token hits and the busiest part's share of the hits over the mean part's."""
    period = experts // math.gcd(top_k, experts)
    tokens = 10 * period
    idx = np.arange(tokens * top_k).reshape(-1, top_k) % experts
    part = idx * parts // experts
    hit = np.zeros((tokens, parts), dtype=bool)
    for t in range(tokens):
        hit[t, part[t]] = True
    mean_hits = hit.sum(axis=1).mean()
    freq = hit.mean(axis=0)
    h, f = moe_routing.cyclic_part_hits(experts, top_k, parts)
    assert float(h) == pytest.approx(mean_hits, rel=1e-12)
    assert float(f) == pytest.approx(freq.max() / freq.mean(), rel=1e-12)


# ------------------------------------------------------------------------------------------------------------------
# MaxText's einsum dispatch (mtmoe35) and XLA's dead recomputed GEMMs (xlapar35 / xlagpu35)
# ------------------------------------------------------------------------------------------------------------------


def _numpy_flops(subscripts: str, *shapes: tuple[int, ...]) -> float:
    """numpy's count of a contraction's FLOPs (einsum_path: 2 x the product of every index's extent for one
    pairwise product-and-sum), as it prints it (4 significant digits)."""
    info = np.einsum_path(subscripts, *(np.empty(s) for s in shapes), optimize="optimal")[1]
    line = next(x for x in info.splitlines() if "Optimized FLOP count" in x)
    return float(line.split(":")[1])


def test_einsum_dispatch_flops_by_numpy() -> None:
    """The dispatch BSM,BSEC -> EBCM and the combine EBCM,BSEC -> BSM of MaxText's dense_matmul, b 2, s 64, h 32,
    E 4, C = cf k s / E = 1.5 x 2 x 64 / 4 = 48: numpy's FLOP count of both equals the forward FLOPs priced."""
    b, s, h, e, k, cf = 2, 64, 32, 4, 2, 1.5
    c = int(cf * k * s / e)
    sh = transformer.shape(layers=1, hidden=h, heads=4, vocab=100, gated_mlp=True, moe_experts=e, moe_top_k=k,
                           moe_ffn_hidden=64)
    ed = compute.moe_einsum_dispatch(sh, micro_batch=b, seq_len=s, capacity_factor=cf, peak_flops=1e15,
                                     memory_bandwidth=1e12)
    dispatch = _numpy_flops("bsm,bsec->ebcm", (b, s, h), (b, s, e, c))
    combine = _numpy_flops("ebcm,bsec->bsm", (e, b, c, h), (b, s, e, c))
    assert float(ed.forward_flops) == pytest.approx(dispatch + combine, rel=1e-3)  # numpy prints 4 digits


def test_xla_dead_flops_of_a_parallel_block_by_hand() -> None:
    """A parallel block (GPT-J / PaLM), 3 layers, h 256, 8 heads of 32, f 1024 (not gated), s 128: XLA's remat drops
    each layer's down-projection (2 s f h) and attention output projection (2 s (a d) h): 3 x (2 x 128 x 1024 x 256
    + 2 x 128 x 256 x 256) = 250,331,136 FLOPs; a sequential block drops only the down-projections."""
    kw = dict(layers=3, hidden=256, heads=8, vocab=100, ffn_hidden=1024)
    par = transformer.shape(parallel_block=True, **kw)
    seq = transformer.shape(**kw)
    assert float(transformer.xla_remat_dead_flops(par, 128)) == 3 * (2 * 128 * 1024 * 256 + 2 * 128 * 256 * 256)
    assert float(transformer.xla_remat_dead_flops(seq, 128)) == 3 * 2 * 128 * 1024 * 256


# ------------------------------------------------------------------------------------------------------------------
# recursive halving / doubling after MPICH's fold (rhdbig35's closed form)
# ------------------------------------------------------------------------------------------------------------------


def _pairs_by_listing(p: int, bounds: list[int], ntiers: int, steps: int) -> tuple[np.ndarray, int]:
    """Every pair of every step, one by one: r = p - p' ranks fold into their neighbours (2i into 2i + 1), rank j of
    the p' left is 2j + 1 below r and j + r above; step k pairs j with j xor 2^k; a pair's tier counts the bounds
    it straddles."""
    p2 = 1 << (p.bit_length() - 1)
    r = p - p2
    lg = p2.bit_length() - 1
    crossed = np.zeros((steps, ntiers), dtype=bool)
    for k in range(min(steps, lg)):
        for j in range(p2):
            if j & (1 << k):
                continue
            x = 2 * j + 1 if j < r else j + r
            jj = j + (1 << k)
            y = 2 * jj + 1 if jj < r else jj + r
            crossed[k, sum(x // c != y // c for c in bounds)] = True
    return crossed, lg


def test_folded_crossings_match_every_pair_listed() -> None:
    """Random groups of 3 to 3000 ranks (no power of two) on two or three tiers of nested domains."""
    rng = np.random.default_rng(36)
    for _ in range(60):
        p = int(rng.integers(3, 3000))
        if p & (p - 1) == 0:
            p += 1
        c0 = int(rng.integers(2, 17))
        bounds = [c0] if rng.random() < 0.5 else [c0, c0 * int(rng.integers(2, 9))]
        ntiers, steps = len(bounds) + 1, 12
        got, reach = _folded_crossings(np.array([p], dtype=np.int64), np.array([bounds], dtype=np.int64), ntiers,
                                       steps)
        want, lg = _pairs_by_listing(p, bounds, ntiers, steps)
        assert int(reach[0]) == lg
        for k in range(min(steps, lg)):
            assert np.array_equal(got[k][0], want[k]), (p, bounds, k)


# ------------------------------------------------------------------------------------------------------------------
# the interleaved bubble's chunks under overlap_p2p_comm (vpp35: step._chunk_time)
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pp", "v", "tp"), [(4, 9, 4), (4, 3, 1), (2, 2, 8)])
def test_vpp_chunks_sum_to_the_rank_and_hide_no_more_than_the_exchanges(pp: int, v: int, tp: int) -> None:
    """gpt-7.5b (36 layers) on dgx-h100: v equal chunks of a middle rank, each T_b(n) - T_b(0) + (T_b(0) - hidden)/v
    with T_b the stage with every exchange exposed and hidden = T_b(rank) - T(rank), add up to the rank's own
    micro-batch time T(rank) (the stage is linear in its layers: T_b(n v) - T_b(0) = v (T_b(n) - T_b(0))), and what
    the overlap takes off the rank is less than the empty stage's exposed exchanges, so no chunk is priced below its
    layers' compute."""
    tr = TrainingSpec(global_batch=16, micro_batch=1)
    job = build_job(load_cluster("dgx-h100"), load_workload("gpt-7.5b"), tr)
    st = StrategySpec(tp=tp, pp=pp, schedule=f"interleaved:{v}", overlap_p2p_comm=True, overlap_p2p_send_wait=False)
    g = grid_from_strategy(st, tr, tp * pp, job)
    stage = _stage_memo(job, g, parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp))
    rank = np.full(1, 36.0 / pp)
    t_rank = float(stage(rank, False).time[0])
    hidden = float(stage(rank, False, blocking_p2p=True).time[0]) - t_rank
    empty = float(stage(np.zeros(1), False, blocking_p2p=True).time[0])
    assert 0.0 < hidden < empty
    chunk = float(_chunk_time(stage, rank / v, v, rank_hidden=hidden)[0])
    assert v * chunk == pytest.approx(t_rank, rel=1e-9)
    assert chunk > float(stage(rank / v, False, blocking_p2p=True).time[0]) - empty


# ------------------------------------------------------------------------------------------------------------------
# hierarchical ring latency on whole sub-groups (d544ca0f)
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("ranks", "outer_steps"), [(33, 1), (49, 1), (64, 1), (65, 2), (97, 3)])
def test_hierarchical_ring_hops_by_hand(ranks: int, outer_steps: int) -> None:
    """A 0-byte hierarchical all-gather over domains of 32 (1 us hops) under a 1 s outer hop: 31 inner ring steps,
    then a ring over the ceil(p / 32) sub-groups, one step fewer than sub-groups (97 ranks: 4 sub-groups, 3 s); the
    all-reduce goes up and down, twice each."""
    net = Network(tiers=(Tier(name="nvlink", span=32, bandwidth=200e9, latency=1e-6, efficiency=0.8),
                         Tier(name="net0", span=128, bandwidth=25e9, latency=1.0, efficiency=0.9)), gpus_per_node=32)
    ag = float(coll.raw_algorithm_time("allgather", "hierarchical", 0.0, ranks, net))
    ar = float(coll.raw_algorithm_time("allreduce", "hierarchical", 0.0, ranks, net))
    assert ag == pytest.approx(31e-6 + outer_steps * 1.0, rel=1e-12)
    assert ar == pytest.approx(2 * (31e-6 + outer_steps * 1.0), rel=1e-12)


# ------------------------------------------------------------------------------------------------------------------
# DeepSpeed ZeRO-2 reduces after every micro-batch's backward (review36)
# ------------------------------------------------------------------------------------------------------------------


def _zero_traffic(zero: int, m: int, **extra: object):  # type: ignore[no-untyped-def]
    job = build_job(load_cluster("dgx-h100"), load_workload("gpt-7.5b"), TrainingSpec(precision="bf16"))
    base = dict(gpus=8, dp=8, tp=1, pp=1, micro_batch=1, global_batch=8 * m, overlap=True, zero=zero, **extra)
    g = grid_from_arrays(**{k: np.asarray([v]) for k, v in base.items()})
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    comp = dict(_stage(job, g, groups, np.asarray([float(job.shape.layers)]), True).busy, pipeline_rank=np.zeros(1))
    traffic = dp_comm._sync_traffic(job, g, comp, np.asarray([float(m)]), "bsp", groups)
    return job, g, comp, traffic


def test_deepspeed_zero2_reduces_every_micro_batch() -> None:
    """DeepSpeed@edaa7221 stage_1_and_2.py L1767-1769: ``if self.partition_gradients or
    self.is_gradient_accumulation_boundary()``: ZeRO-2 (partition_gradients) reduce-scatters each backward's
    gradients, ZeRO-1 only at the boundary. At m = 4 micro-batches ZeRO-2's step moves 3 more reduce-scatters than
    ZeRO-1's (the same RS and parameter all-gather at m = 1), and with the windows wide open each of them exposes
    its last bucket as the boundary's does; Apex's DistributedFusedAdam (bucket_fragments) at zero 2 reduces once."""
    _, _, _, one = _zero_traffic(1, 1)
    _, _, _, two_one = _zero_traffic(2, 1)
    rs = float(one[0][0]["grads"][0] - one[0][0]["param_gather"][0])
    assert rs > 0 and float(two_one[0][0]["grads"][0]) == pytest.approx(float(one[0][0]["grads"][0]), rel=1e-12)
    job, g1, comp, z1 = _zero_traffic(1, 4)
    _, g2, _, z2 = _zero_traffic(2, 4)
    _, g3, _, apex = _zero_traffic(2, 4, bucket_fragments=True)
    assert float(z1[0][0]["grads"][0]) == pytest.approx(float(one[0][0]["grads"][0]), rel=1e-12)
    assert float(z2[0][0]["grads"][0]) == pytest.approx(float(z1[0][0]["grads"][0]) + 3 * rs, rel=1e-12)
    assert float(apex[0][0]["grads"][0] - apex[0][0]["param_gather"][0]) < 1.5 * rs  # once a step
    wide = dict(comp, forward_free=np.full(1, 1e6), backward_free=np.full(1, 1e6))
    last = float(z1[0][0]["last_bucket"][0])
    e1 = float(dp_comm._sync_exposed(job, g1, z1, wide, "bsp")[0][0])
    e2 = float(dp_comm._sync_exposed(job, g2, z2, wide, "bsp")[0][0])
    assert e2 - e1 == pytest.approx(3 * rs * last, rel=1e-9)
    shut = dict(comp, forward_free=np.zeros(1), backward_free=np.zeros(1))
    assert float(dp_comm._sync_exposed(job, g2, z2, shut, "bsp")[0][0]) == pytest.approx(
        float(z2[0][0]["grads"][0]), rel=1e-9)  # nothing hides: every reduce-scatter and the gather exposed
