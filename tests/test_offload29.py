"""offload29: MaxText's host offload of named per-layer tensors (strategy offload_tensors, docs/model.md#offload).

MaxText's remat policy ``custom`` (and ``qkv_proj_offloaded``) sends the tensors it names 'offload' to pinned host
memory with JAX ``save_and_offload_only_these_names`` (AI-Hypercomputer/maxtext@92e59fdf5
src/MaxText/layers/decoders.py ``get_remat_policy``). The values below are worked by hand from the shape of the
mttier25 Llama 3.1 8B row (tpu-recipes Llama3.1-8B-MaxText/v6e-256: per-device batch 4, sequence 8192, emb 4096,
32 / 8 heads of 128) and the v6e host link (32 GB/s per chip, jax-ml/scaling-book@04d8de58 tpus.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.api import predict
from scalemodel.choices import Recompute
from scalemodel.cost.memory import RECOMPUTE_MODULES
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import OFFLOAD_TENSORS, TrainingSpec
from tests.test_hostile_inputs import refused

B, S, H, HEADS, KV, D = 4, 8192, 4096, 32, 8, 128
TOKENS = B * S  # one micro-batch of one chip (FSDP 256, tp 1, cp 1)
#: per token, 16-bit: layer input h, query heads x d, key and value kv_heads x d, out_proj h
BY_HAND = {"decoder_layer_input": 2 * H, "query_proj": 2 * HEADS * D, "key_proj": 2 * KV * D,
           "value_proj": 2 * KV * D, "out_proj": 2 * H}
ALL = 2 * TOKENS * (H + HEADS * D + KV * D + KV * D + H)  # 939,524,096 bytes a layer


def _job_grid(names: tuple[str, ...], **extra: object):  # type: ignore[no-untyped-def]
    job = build_job(load_cluster("tpu-v6e-pod"), load_workload("llama3-8b"), TrainingSpec(precision="bf16",
                                                                                          seq_len=S))
    bits = sum(1 << OFFLOAD_TENSORS.index(n) for n in names)
    base = dict(gpus=256, dp=256, tp=1, pp=1, micro_batch=B, global_batch=B * 256, zero=4, overlap=True,
                recompute=Recompute.SELECTIVE, recompute_modules=RECOMPUTE_MODULES["jax_qkvo"], offload_tensors=bits)
    base.update(extra)
    return job, grid_from_arrays(**{k: np.asarray([v]) for k, v in base.items()})


def test_v6e_host_link_from_the_scaling_book() -> None:
    """tpu-v6e-pod's host link: 'Trillium (TPU v6e) has 32GB/s' (per chip; read as per direction)."""
    assert load_cluster("tpu-v6e-pod").host_bandwidth == pytest.approx(32e9)


@pytest.mark.parametrize("name", OFFLOAD_TENSORS)
def test_bytes_per_named_tensor(name: str) -> None:
    """Each name alone: tokens x its width x 2 bytes (e.g. key_proj 32768 x 1024 x 2 = 67,108,864 bytes)."""
    job, g = _job_grid((name,))
    assert float(dp_comm.offloaded_tensor_bytes(job, g)[0]) == pytest.approx(TOKENS * BY_HAND[name], rel=1e-12)


def test_all_five_and_tensor_parallel_split() -> None:
    """The 8B row's five names: 939,524,096 bytes a layer and micro-batch. Under tp 4 with sequence parallelism
    every tensor is a quarter (q / k / v by heads, the residual-stream two by the sequence), without it the layer
    input and out_proj stay whole."""
    assert ALL == 939_524_096
    job, g = _job_grid(OFFLOAD_TENSORS)
    assert float(dp_comm.offloaded_tensor_bytes(job, g)[0]) == pytest.approx(ALL, rel=1e-12)
    _, g4 = _job_grid(OFFLOAD_TENSORS, tp=4, dp=64, sequence_parallel=True)
    assert float(dp_comm.offloaded_tensor_bytes(job, g4)[0]) == pytest.approx(ALL / 4, rel=1e-12)
    _, g4n = _job_grid(OFFLOAD_TENSORS, tp=4, dp=64, sequence_parallel=False)
    by_hand = 2 * TOKENS * (2 * H + (HEADS * D + 2 * KV * D) / 4)
    assert float(dp_comm.offloaded_tensor_bytes(job, g4n)[0]) == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize(("forward_ms", "exposed_ms"), [(20.0, (29.36 - 20.0) + 0.0), (10.0, (29.36 - 10.0) + 9.36),
                                                        (40.0, 0.0)])
def test_hidden_and_exposed_split(forward_ms: float, exposed_ms: float) -> None:
    """c = 939,524,096 B / 32 GB/s = 29.36 ms each way. A layer hides it under its forward W_f and its backward
    W_b = 2 W_f: exposed per layer max(0, c - W_f) + max(0, c - 2 W_f), times the stage's 32 layers. W_f 20 ms:
    9.36 ms (the backward hides its copy); 10 ms: 19.36 + 9.36 ms; 40 ms: hidden."""
    job, g = _job_grid(OFFLOAD_TENSORS)
    comp = {"forward_per_layer": np.asarray([forward_ms / 1e3]), "layers_per_stage": np.asarray([32.0])}
    c = ALL / 32e9
    assert c * 1e3 == pytest.approx(29.36, abs=0.01)
    got = float(dp_comm._offload_time(job, g, comp)[0])
    by_hand = 32 * (max(0.0, c - forward_ms / 1e3) + max(0.0, c - 2 * forward_ms / 1e3))
    assert got == pytest.approx(by_hand, rel=1e-12)
    assert got == pytest.approx(32 * exposed_ms / 1e3, abs=32 * 0.01e-3)
    # nothing named: no copy (the whole-layer route alone)
    _, none = _job_grid(())
    assert float(dp_comm._offload_time(job, none, comp)[0]) == 0.0
    # no host link: nothing priced (the spec check refuses such a strategy before)
    assert float(dp_comm._offload_time(replace(job, host_bandwidth=0.0), g, comp)[0]) == 0.0


def test_offloaded_tensors_leave_hbm() -> None:
    """The 8B row: jax_qkvo keeps exactly these five tensors a layer (cost.memory), so offloading all five takes
    32 layers x 939,524,096 bytes off the activations (one micro-batch in flight, pp 1), and nothing else moves.
    (Fragmentation is a share of the rest, so the total moves by more; the parts compared are the raw ones.)"""
    kw = dict(tp=1, pp=1, dp=256, micro_batch=B, global_batch=B * 256, zero="fsdp", recompute="selective",
              recompute_modules="jax_qkvo", precision="bf16", seq_len=S)
    kept = predict("tpu-v6e-pod", "llama3-8b", 256, **kw)
    off = predict("tpu-v6e-pod", "llama3-8b", 256, offload_tensors=list(OFFLOAD_TENSORS), **kw)
    a0, a1 = kept.memory["parts_bytes"]["activations"], off.memory["parts_bytes"]["activations"]
    assert a0 - a1 == pytest.approx(32 * ALL, rel=1e-9)
    for part in ("weights", "gradients", "optimizer"):
        assert kept.memory["parts_bytes"][part] == off.memory["parts_bytes"][part]
    # the recipe needs it: 30.1 GB of kept tensors do not fit beside the rest in a v6e's 32 GB, offloaded they do
    assert not kept.memory["fits"] and off.memory["fits"]
    # the model's forward layer is longer than the copy here, so the step is the same
    assert off.step_time_s == pytest.approx(kept.step_time_s, rel=1e-12)


QKVO = ["--set", "strategy.recompute=selective", "--set", "strategy.recompute_modules=jax_qkvo"]


@pytest.mark.parametrize(("extra", "match"), [
    (["--set", "strategy.recompute=full"], "recompute_modules jax_qkvo"),
    (["--set", "strategy.recompute=selective", "--set", "strategy.recompute_modules=core_attn"],
     "recompute_modules jax_qkvo"),
    ([*QKVO, "--set", "strategy.offload_layers=4"], "offload_layers"),
    ([*QKVO, "--set", "cluster.host_bandwidth=null"], "host link"),
])
def test_refused_where_not_priced(cli, extra: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    """One error line, exit 2: without jax_qkvo (the policy whose kept tensors go to the host instead), beside
    whole-layer offload, or without the host link's rate."""
    base = ["predict", "-c", "tpu-v6e-pod", "-m", "llama3-8b", "-n", "256", "--set", "training.seq_len=8192",
            "--set", "strategy.zero=fsdp", "--set", "strategy.offload_tensors=[query_proj,key_proj]"]
    refused(cli, *base, *extra, match=match)


def test_unknown_tensor_name_refused(cli) -> None:  # type: ignore[no-untyped-def]
    """mlpwi_0 is a MaxText name the model does not offload (its MLP widths are not priced as host copies)."""
    refused(cli, "predict", "-c", "tpu-v6e-pod", "-m", "llama3-8b", "-n", "256", "--set",
            "strategy.offload_tensors=[mlpwi_0]", match="offload_tensors")
