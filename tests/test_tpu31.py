"""tpu31: the TP collectives a JAX remat policy's backward runs again, auto's choice on a torus, and an ICI tier on a
GPU cluster.

(1) ``jax.checkpoint`` keeps the residuals its policy names and recomputes the rest; under ``jit`` XLA's SPMD
partitioner inserts the collectives on the program that AD and remat produced, so a recomputed value brings its
collective with it. MaxText shards the residual stream's embed dimension over 'tensor' (base.yml
``['activation_embed', 'tensor']``): a column-parallel matmul gathers its normed input (an all-gather of the s b h
activation over the tensor group), a row-parallel one reduce-scatters its output. The policies keep matmul outputs,
never a norm's, so the weight gradients of Q / K / V and of the MLP up-projections gather their input again: two
all-gathers a sequential layer under ``jax_dots`` and ``jax_qkvo``; ``jax_qkv`` also recomputes out_proj, whose output
rebuilds the residual sum (its reduce-scatter again). Checked by hand on Llama 3 8B (32 layers, h 4096) at tensor 4
on a v5e slice, one 4096-token sequence a TP group: each gather moves the whole s b h bf16 activation, 4096 x 4096 x 2
bytes, priced as one all-gather of that buffer over the 4 chips (the collective layer's own price, checked in
tests/test_topology.py and tests/test_tpucoll30.py).

(2) On a (sub-)torus group only the ring is priced link by link; rhd was priced on switch links held at the injection
floor and won by its fewer hops. A step simulation of recursive halving on one torus dimension shows its busiest link
carrying log2(d) S / 2 bytes against the ring's (d - 1)/d S / 2: the ring is the cheaper one at any size where
bandwidth counts, so auto takes it there.

(3) ``protocol: ici`` on a GPU cluster turned NCCL's protocol layer off on every tier; refused now.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

import scalemodel.api as api
from scalemodel.cost import topology as T

LAYERS, HIDDEN, SEQ = 32, 4096, 4096  # llama3-8b (meta-llama config.json), one sequence a TP group
ACT_BYTES = SEQ * 1 * HIDDEN * 2  # the s b h bf16 activation each TP collective moves (gathered buffer)
RUN = dict(tp=4, zero="fsdp", micro_batch=1, global_batch=64, seq_len=SEQ)  # 256 chips: dp 64, one micro-batch


def _tp_comm(sp: bool, recompute: str, modules: str = "") -> float:
    extra = {"recompute_modules": modules} if modules else {}
    r = api.predict("tpu-v5e-pod", "llama3-8b", 256, sequence_parallel=sp, recompute=recompute, **extra, **RUN)
    return float(r.breakdown_s["tp_comm"])


def _best(op: str) -> float:
    """One collective of the activation over the tensor group (4 chips, stride 1) as the collective layer prices it."""
    row = api.collective("tpu-v5e-pod", op, ACT_BYTES, 4).rows[0]
    return float(next(a["time_s"] for a in row["algorithms"] if a["algorithm"] == row["best"]))


@pytest.mark.parametrize(("modules", "gathers", "scatters"), [
    ("jax_dots", 2, 0),   # Q / K / V and up-projection outputs kept: both norm outputs gathered again
    ("jax_qkvo", 2, 0),   # the same gathers; the up-projections re-run on the second
    ("jax_qkv", 2, 1),    # and out_proj again: its reduce-scatter rebuilds the residual sum
])
def test_jax_policies_repeat_the_gathers_their_backward_needs(modules: str, gathers: int, scatters: int) -> None:
    """With sequence parallelism the step's TP time grows, over core_attn's (no TP collective recomputed), by
    L (gathers AG + scatters RS) of the s b h activation: 32 x 2 x 158 us = 10.1 ms for jax_qkvo."""
    extra = _tp_comm(True, "selective", modules) - _tp_comm(True, "selective", "core_attn")
    by_hand = LAYERS * (gathers * _best("allgather") + scatters * _best("reducescatter"))
    assert extra == pytest.approx(by_hand, rel=1e-9)
    assert extra > 0.009  # 64 gathers of 33.5 MB over 4 chips at 160 GB/s: about 10 ms


@pytest.mark.parametrize(("modules", "allreduces"), [("jax_dots", 0), ("jax_qkvo", 0), ("jax_qkv", 1)])
def test_without_sequence_parallelism_only_out_proj_repeats(modules: str, allreduces: int) -> None:
    """Without SP the norm outputs are whole on every TP rank (nothing to gather); jax_qkv's recomputed out_proj
    all-reduces its partial sums again."""
    extra = _tp_comm(False, "selective", modules) - _tp_comm(False, "selective", "core_attn")
    assert extra == pytest.approx(LAYERS * allreduces * _best("allreduce"), rel=1e-9, abs=1e-12)


def test_full_recompute_repeats_what_jax_qkv_does() -> None:
    """XLA's full remat repeats the forward's collectives but the down-projection's (xla_remat): AG, RS, AG, the
    same three jax_qkv's backward runs again (one route per policy, no collective counted twice)."""
    full = _tp_comm(True, "full") - _tp_comm(True, "none")
    qkv = _tp_comm(True, "selective", "jax_qkv") - _tp_comm(True, "selective", "core_attn")
    assert full == pytest.approx(qkv, rel=1e-9)


# --- (2) auto on a torus -----------------------------------------------------------------------------------------

def _rhd_busiest_link_bytes(d: int, S: float) -> float:
    """Recursive-halving reduce-scatter on a bidirectional ring of d nodes (one torus dimension), step by step: at
    distance delta = 1, 2, .., d/2 each pair exchanges S / 2^(k+1), the lower node sending delta hops one way and the
    upper one the other way (shortest paths); returns the sum over steps of the busiest directed link's bytes."""
    total, size, delta = 0.0, S / 2.0, 1
    while delta < d:
        load: dict[tuple[int, int], float] = {}
        for i in range(d):
            if i & delta:
                continue
            for hop in range(delta):  # i -> i + delta on the + links, i + delta -> i on the - links
                up = ((i + hop) % d, +1)
                down = ((i + delta - hop) % d, -1)
                load[up] = load.get(up, 0.0) + size
                load[down] = load.get(down, 0.0) + size
        total += max(load.values())
        size, delta = size / 2.0, delta * 2
    return total


@pytest.mark.parametrize("d", [4, 8, 16])
def test_recursive_halving_on_a_torus_dimension_loads_its_links_more_than_the_ring(d: int) -> None:
    S, b_link = 1e9, 1e11
    rhd = _rhd_busiest_link_bytes(d, S)
    assert rhd == pytest.approx(np.log2(d) * S / 2.0)  # S / 2 over the busiest link at every step
    ring = float(T.torus_allreduce(S, (d,), 0.0, b_link, op="reducescatter")) * b_link
    assert ring == pytest.approx((d - 1) / d * S / 2.0)
    assert rhd / ring == pytest.approx(np.log2(d) * d / (d - 1))


@pytest.mark.parametrize(("cluster", "ranks"), [("tpu-v3-pod", 1024), ("tpu-v5e-pod", 256), ("tpu-v5e-pod", 16)])
@pytest.mark.parametrize("op", ["allreduce", "reducescatter", "allgather"])
def test_auto_takes_the_torus_ring_on_a_torus_group(cluster: str, ranks: int, op: str) -> None:
    """The whole torus and one whole dimension (16 chips at stride 1 of a 16 x 16 v5e slice): auto is the ring at
    the ring's price (rhd won by its fewer hops before tpu31: 1 GiB over the v3 pod, 6.72 ms against 6.80)."""
    row = api.collective(cluster, op, 1 << 30, ranks).rows[0]
    ring = next(a["time_s"] for a in row["algorithms"] if a["algorithm"] == "ring")
    best = next(a["time_s"] for a in row["algorithms"] if a["algorithm"] == row["best"])
    assert row["best"] == "ring" and best == ring


def test_auto_keeps_every_algorithm_off_the_torus_forms() -> None:
    """A group off the torus forms (4 chips at stride 3: 12 chips, no tiling of the 16) is switch-priced: auto still
    weighs every algorithm there. (Was 4 chips at stride 1, then at stride 2; since tpu33 / review33a those segments of
    one dimension are held at their line's floor, where every algorithm ties.)"""
    row = api.collective("tpu-v5e-pod", "allgather", ACT_BYTES, 4, stride=3).rows[0]
    times = {a["algorithm"]: a["time_s"] for a in row["algorithms"]}
    assert row["best"] == min(times, key=times.__getitem__) != "ring"


# --- (3) an ICI tier on a GPU cluster ------------------------------------------------------------------------------

GPU_ICI = """kind: cluster
name: gpu-ici
accelerator: h100-sxm
gpus_per_node: 8
tiers:
  - {name: nvlink, span: 8, bandwidth: 450 GB/s, latency: 2 us, efficiency: 0.8, protocol: ici}
  - {name: ib, span: 64, bandwidth: 50 GB/s, latency: 5 us, efficiency: 0.9, protocol: rdma}
"""


def test_an_ici_tier_on_a_gpu_cluster_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It was priced as XLA on a TPU (no NCCL protocol layer on any tier, nccl.runs_nccl); GPUs run NCCL / RCCL."""
    f = tmp_path / "gpu-ici.yaml"
    f.write_text(GPU_ICI)
    line = refused(cli, "predict", "-c", str(f), "-m", "gpt-1.7b", "-n", "64", inputs=(f,))
    assert line.startswith(f"error: {f}:6: tiers: tiers[0] ('nvlink') protocol 'ici' on h100-sxm accelerators "
                           "(hopper)") and "a TPU accelerator (family tpu)" in line, line


def test_a_tpu_cluster_given_a_gpu_is_refused_at_the_accelerator(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "tpu-v5e-pod", "-m", "llama3-8b", "-n", "256", "--set",
                   "cluster.accelerator=h100-sxm")
    assert line.startswith("error: --set cluster.accelerator: tiers: tiers[0] ('ici') protocol 'ici'"), line
