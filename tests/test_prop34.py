"""Physical invariants the property tests did not assert for some strategy families (hypothesis; issue 13, prop34).

tests/test_physics30.py bounds the step by the bytes crossing each tier for a plain data-parallel all-reduce of
uncompressed gradients and for the EP exchange; tests/test_physics_wide.py asserts the other invariants over every
strategy field. What none asserted, and this file does, each on ``wide_cases``' draws narrowed by a few fields:

- parameter servers (BytePS at machine level, docs/model.md#parameter-server): the gradients a node pushes and the
  parameters it pulls cross its uplinks; a dedicated server receives every machine's share;
- gradient compression (fp16 cast, int8, top-k; docs/model.md#compression): the compressed bytes still cross each
  tier, at least one byte an int8 element, and top-k's all-gathered payloads (distinct on every rank) enter every
  domain;
- fewer layers are never slower (every other field of the candidate kept);
- twice the replicas at the same per-GPU work do twice the model FLOPs (weak scaling), never fewer.

Each tier bound is the bytes that must cross a tier over the tier's per-GPU line rate, whatever overlap hides:
a link busy for t seconds keeps the step at least t long (Patarasuk & Yuan, JPDC 69(2) 2009, Theorem 1 for the
reduction; the all-gather's by the same counting).
"""

from __future__ import annotations

from functools import cache

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scalemodel.choices import CompressionKind
from scalemodel.engine.dp_comm import ps_server_line
from scalemodel.engine.job import build_job
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import TrainingSpec
from tests.test_physics import _crossings, _scaled_network
from tests.test_physics30 import SLOWER
from tests.test_physics_wide import _eval, _steps_per_sync, _wide_job, wide_cases

#: each test prices one to three candidates an example (~0.1-0.3 s each on one core): CI's count; run locally at
#: 10-50x with several seeds before a change to the engine they cover (validation/README.md, prop34)
PROP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.filter_too_much])

#: pure data parallelism: no model-parallel dimension, no pipeline split, no sharding of the parameters
PURE_DP = dict(tp=1, pp=1, cp=1, ep=1, sequence_parallel=False, schedule=0, virtual_stages=1, stage_split=-1,
               first_stage_layers=-1, last_stage_layers=-1, first_chunk_layers=-1, last_chunk_layers=-1)


#: Llama 3 8B over 8 DGX H100 nodes, pure data parallelism (the explicit examples: with the links 10,000x slower the
#: gradients' bytes bind, and a model that dropped half of them fails each bound whatever hypothesis draws)
H100_DP64 = dict(gpus=64, dp=64, tp=1, pp=1, cp=1, micro_batch=1, global_batch=64, zero=0, overlap=True,
                 compression=0, topk_ratio=1.0, ps_servers=0, ps_colocated=False, shard_group=0,
                 fp4_param_gather=False, fp8_param_gather=False, fsdp_fp8_all_gather=False)
LLAMA_H100 = _wide_job("dgx-h100", "llama3-8b", "bf16", None, 4096)


def _slowed(job, a, slower: float, sync: str = "bsp"):  # type: ignore[no-untyped-def]
    """The job with every link ``slower`` times its rate, its step under ``a`` and the tier boundaries its
    data-parallel group crosses (none where the group's domains are uneven or it crosses none: step 0, not priced)."""
    job = _scaled_network(job, slower)
    crossings = _crossings(job.network, a["dp"], 1) or []
    return job, float(_eval(job, a, sync).step_time[0]) if crossings else 0.0, crossings


def _dense(case) -> bool:  # type: ignore[no-untyped-def]
    job = case[0]
    return not (job.is_transformer and int(job.shape.moe_experts))


# --- parameter servers ----------------------------------------------------------------------------------------------

@st.composite
def ps_cases(draw):  # type: ignore[no-untyped-def]
    """wide_cases as a pure data-parallel run of a dense (or generic) model through k parameter servers (dedicated or
    colocated), ZeRO off (refused with a parameter server), no top-k (refused too), over at least two machines."""
    job, arrays, sync = draw(wide_cases().filter(_dense))
    span, gpn = job.network.tiers[-1].span, job.network.gpus_per_node
    dp = draw(st.sampled_from([d for d in (16, 64, 256, 512) if 2 * gpn <= d <= span] or [span]))
    arrays = dict(arrays, **PURE_DP, gpus=dp, dp=dp, global_batch=dp * arrays["micro_batch"], zero=0,
                  ps_servers=draw(st.sampled_from((1, 2, 4, 8))), ps_colocated=draw(st.booleans()),
                  compression=draw(st.sampled_from((0, 0, 1, 2))))
    # hier:G reduces within groups first (its bound is not one push a step): drawn as bsp here
    return job, arrays, "bsp" if sync.startswith("hier") else sync


def _wire_bytes(job, compression: int) -> float:  # type: ignore[no-untyped-def]
    """Bytes a gradient element takes on the wire at least: 16-bit gradients uncompressed (bf16 / fp16 training, or
    fp32 reductions, more) and cast to fp16, one byte quantised to int8 (docs/model.md#compression)."""
    return 1.0 if compression == int(CompressionKind.INT8) else 2.0


@PROP
@given(ps_cases(), st.sampled_from(SLOWER))
@example((LLAMA_H100, dict(H100_DP64, ps_servers=8), "bsp"), 1e-4)
@example((LLAMA_H100, dict(H100_DP64, ps_servers=2, ps_colocated=True, compression=2), "asp"), 1e-4)
def test_parameter_server_never_beats_the_bytes_a_node_pushes(case, slower) -> None:  # type: ignore[no-untyped-def]
    """Every node's replicas hold the whole gradient; the servers hold the parameters. Dedicated servers are outside
    every domain of the workers' network, so each child domain of every tier the group crosses (c ranks) sends at
    least one reduced copy of the P gradients, q bytes an element, out through its c uplinks and receives the P
    updated parameters back: step >= P q / (c B) each direction. Colocated servers sit on the workers' machines: a
    domain holding a share F of the shards sends at least (1 - F) P q and receives at least F P q (the share its
    servers reduce from the other domains), so the larger is at least P q / 2: step >= P q / (2 c B). Local SGD
    pushes once every H steps (the step is the H-step mean): the bound over H. BytePS also sends every machine's
    share to the servers (Jiang et al. OSDI 2020 section 2): a dedicated server's NIC moves at least W P q / k each
    way for W machines and k servers."""
    job, a, sync = case
    rounds = _steps_per_sync(sync) or (1 if sync in ("asp", "ssp:4") else 0)
    if not rounds:
        return
    job, step, crossings = _slowed(job, a, slower, sync)
    if not crossings:
        return
    p_q = job.params * _wire_bytes(job, a["compression"])
    share = 0.5 if a["ps_colocated"] else 1.0
    for _, outer, c, _n in crossings:
        bound = share * p_q / (c * outer.bandwidth) / rounds
        assert step >= bound * (1 - 1e-9), (a, sync, outer.name, step, bound)
    if not a["ps_colocated"]:
        machines = -(-a["gpus"] // job.network.gpus_per_node)
        line, _ = ps_server_line(job)
        bound = machines * p_q / (a["ps_servers"] * line) / rounds
        assert step >= bound * (1 - 1e-9), (a, sync, "server NIC", step, bound)


# --- gradient compression over an all-reduce / all-gather ----------------------------------------------------------

@st.composite
def compression_cases(draw):  # type: ignore[no-untyped-def]
    """wide_cases as a pure data-parallel bulk-synchronous run of a dense (or generic) model with its gradients
    compressed (fp16, int8, top-k at 1 % or 10 %), ZeRO 0-2 (top-k with ZeRO 0 or 1: ZeRO 2 shards the gradients,
    refused with it), the group wide enough to cross the node."""
    job, arrays, _ = draw(wide_cases().filter(_dense))
    span = job.network.tiers[-1].span
    dp = draw(st.sampled_from([d for d in (16, 64, 256, 512, 1024) if d <= span] or [span]))
    compression = draw(st.sampled_from((1, 2, 3)))
    zero = draw(st.sampled_from((0, 1) if compression == int(CompressionKind.TOPK) else (0, 1, 2)))
    arrays = dict(arrays, **PURE_DP, gpus=dp, dp=dp, global_batch=dp * arrays["micro_batch"], zero=zero,
                  compression=compression, topk_ratio=draw(st.sampled_from((0.01, 0.1))), ps_servers=0)
    return job, arrays


@PROP
@given(compression_cases(), st.sampled_from(SLOWER))
@example((LLAMA_H100, dict(H100_DP64, compression=int(CompressionKind.INT8))), 1e-4)
@example((LLAMA_H100, dict(H100_DP64, compression=int(CompressionKind.TOPK), topk_ratio=0.01, zero=1)), 1e-4)
def test_compressed_gradients_never_beat_the_bytes_crossing_each_tier(case, slower) -> None:  # type: ignore[no-untyped-def]
    """Quantised gradients (fp16: 2 bytes an element, int8: 1) are reduced like uncompressed ones: each child domain
    of c ranks (n = p / c domains) sends out at least (n - 1) / n of the P q bytes: step >= (n - 1) / n P q / (c B).
    Top-k's selections differ from rank to rank and are all-gathered (DeepSpeed / Horovod style sparse exchange:
    rho P values and int32 indices a rank): every domain must receive the p - c payloads of the ranks outside it
    through its c links: step >= (p - c) rho P (g + 4) / (c B), g the gradient element's bytes."""
    a = case[1]
    job, step, crossings = _slowed(case[0], a, slower)
    for _, outer, c, n in crossings:
        if a["compression"] == int(CompressionKind.TOPK):
            bound = (a["dp"] - c) * a["topk_ratio"] * job.params * (job.grad_bytes + 4.0) / (c * outer.bandwidth)
        else:
            bound = (n - 1) / n * job.params * _wire_bytes(job, a["compression"]) / (c * outer.bandwidth)
        assert step >= bound * (1 - 1e-9), (a, outer.name, step, bound)


# --- sharded data parallelism: ZeRO-3, FSDP, HSDP ------------------------------------------------------------------

@st.composite
def sharded_cases(draw):  # type: ignore[no-untyped-def]
    """wide_cases as a pure data-parallel bulk-synchronous run of a dense (or generic) model with its parameters
    sharded: ZeRO-3, FSDP, or HSDP (shard groups of 2, 8 replicas, or a node's), the group wide enough to cross the
    node."""
    job, arrays, _ = draw(wide_cases().filter(_dense))
    span = job.network.tiers[-1].span
    dp = draw(st.sampled_from([d for d in (16, 64, 256, 512, 1024) if d <= span] or [span]))
    zero = draw(st.sampled_from((3, 4, 5)))
    arrays = dict(arrays, **PURE_DP, gpus=dp, dp=dp, global_batch=dp * arrays["micro_batch"], zero=zero,
                  shard_group=draw(st.sampled_from((0, 2, 8))) if zero == 5 else 0, compression=0, ps_servers=0)
    return job, arrays


@PROP
@given(sharded_cases(), st.sampled_from(SLOWER))
@example((LLAMA_H100, dict(H100_DP64, zero=4)), 1e-4)
@example((LLAMA_H100, dict(H100_DP64, zero=5, shard_group=2)), 1e-4)
def test_sharded_parameters_never_beat_the_bytes_crossing_each_tier(case, slower) -> None:  # type: ignore[no-untyped-def]
    """ZeRO-3 / FSDP over p ranks (n = p / c domains of c ranks across a tier): every step each domain reduce-scatters
    the 16-bit gradients (its contribution to the other domains' shards leaves it: out >= (n - 1) / n 2 P, and one
    reduced copy of its own shard enters: in >= 2 P / n) and all-gathers the parameters at least once before their
    forward (the shards it lacks enter: in >= (n - 1) / n b P; its own leave once: out >= b P / n), b the gathered
    element's bytes (2; 1 with an FP8 gather, 1/2 with NVFP4's): step >= max(in, out) / (c B). HSDP (shard groups of
    g replicas, a node's when not given) across a tier whose domains hold whole groups: the groups' replicas all-reduce
    the gradients, out >= (n - 1) / n 2 P as for plain data parallelism (Patarasuk & Yuan 2009, Theorem 1)."""
    a = case[1]
    job, step, crossings = _slowed(case[0], a, slower)
    b = 0.5 if a["fp4_param_gather"] else 1.0 if a["fp8_param_gather"] or a["fsdp_fp8_all_gather"] else 2.0
    g = a["shard_group"] or min(job.network.gpus_per_node, a["dp"])
    P = job.params
    for _, outer, c, n in crossings:
        if a["zero"] == 5:
            if c % g:
                continue
            moved = (n - 1) / n * 2.0 * P
        else:
            moved = max((n - 1) / n * 2.0 * P + b * P / n, (n - 1) / n * b * P + 2.0 * P / n)
        bound = moved / (c * outer.bandwidth)
        assert step >= bound * (1 - 1e-9), (a, outer.name, step, bound)


# --- fewer layers are never slower ----------------------------------------------------------------------------------

@cache
def _with_layers(cluster: str, model: str, precision: str, recipe: str, seq: int, layers: int):  # type: ignore[no-untyped-def]
    """The job of ``model`` cut to its first ``layers`` layers (the published parameter count dropped: it no longer
    applies), trained as given; None where the specs refuse it."""
    wl = load_workload(model)
    try:
        wl = wl.model_copy(update={"layers": layers, "params": None})
        tr = TrainingSpec(precision=precision, fp8_recipe=recipe if precision == "fp8" and recipe else None,
                          seq_len=seq)
        return build_job(load_cluster(cluster), wl, tr)
    except (InputError, ValueError):
        return None


@st.composite
def layer_cases(draw):  # type: ignore[no-untyped-def]
    """wide_cases for a transformer without a hybrid pattern, its pipeline split even (the drawn per-stage splits
    name the layers, so they are reset), and a smaller layer count, a multiple of the pipeline's (virtual) stages
    above the leading dense layers."""
    job, arrays, sync = draw(wide_cases().filter(lambda c: c[0].is_transformer and c[0].shape.hybrid is None))
    stages = arrays["pp"] * arrays["virtual_stages"]
    layers = int(job.shape.layers)
    moe = load_workload(job.name).moe
    low = (moe.first_dense if moe is not None else 0) + 1
    fewer = [n for n in range(stages, layers, stages) if n >= low]
    if layers % stages or not fewer:
        return None
    cut = draw(st.sampled_from(fewer))
    recipe = "" if job.fp8_recipe in ("", "nvfp4") else job.fp8_recipe
    full = _with_layers(job.cluster_name, job.name, job.precision, recipe, job.seq_len, layers)
    short = _with_layers(job.cluster_name, job.name, job.precision, recipe, job.seq_len, cut)
    if full is None or short is None:
        return None
    arrays = dict(arrays, stage_split=-1, first_stage_layers=-1, last_stage_layers=-1, first_chunk_layers=-1,
                  last_chunk_layers=-1, recompute_layers=min(arrays["recompute_layers"], cut // stages))
    return full, short, arrays, sync


@PROP
@given(layer_cases())
def test_fewer_layers_never_slower(case) -> None:  # type: ignore[no-untyped-def]
    """The same candidate on the model cut to fewer layers runs a subset of the work on the same hardware: fewer
    GEMMs, fewer gradients to reduce, fewer activations to keep, no new traffic. Its step is never longer."""
    if case is None:
        return
    full, short, a, sync = case
    long_step = float(_eval(full, a, sync).step_time[0])
    short_step = float(_eval(short, a, sync).step_time[0])
    assert short_step <= long_step * (1 + 1e-9), (a, sync, int(full.shape.layers), int(short.shape.layers),
                                                  long_step, short_step)


# --- weak scaling: more GPUs at the same per-GPU batch never do fewer FLOPs -----------------------------------------

@PROP
@given(wide_cases())
def test_twice_the_replicas_do_twice_the_model_flops(case) -> None:  # type: ignore[no-untyped-def]
    """Twice the data-parallel replicas with twice the global batch train on twice the samples a step: the model
    FLOPs of the step (6 N per token plus attention, for the whole batch) double, and the step is never below its
    FLOPs at peak on the doubled GPUs."""
    job, a, sync = case
    if a["gpus"] * 2 > job.network.tiers[-1].span:
        return
    one = _eval(job, a, sync)
    two = _eval(job, dict(a, gpus=2 * a["gpus"], dp=2 * a["dp"], global_batch=2 * a["global_batch"]), sync)
    f1, f2 = float(one.model_flops[0]), float(two.model_flops[0])
    assert abs(f2 - 2 * f1) <= 1e-9 * f2, (a, sync, f1, f2)
    assert float(two.step_time[0]) >= f2 / (2 * a["gpus"] * job.peak_flops) * (1 - 1e-12), (a, sync)
