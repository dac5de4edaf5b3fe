"""mem35: PyTorch FSDP2's shards and their gradients at the parameters' dtype (docs/model.md#fsdp2-shard-dtype), and
named-tensor offload refused on a hybrid Mamba pattern.

FSDP2 keeps one sharded tensor per parameter at the dtype the model was built in, and views its gradient out of the
reduce-scatter output cast back to that dtype (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py
``foreach_reduce``: ``target_dtype = orig_dtype``, ``_to_dtype_if_needed(reduce_output, target_dtype)``, at
pytorch/pytorch@010ae4a8951); the param_dtype copy the all-gather reads is a temporary. Every expected value below is
counted by hand from that layout on a one-layer shape whose 824 parameters are counted by hand too."""

from __future__ import annotations

import pytest

from scalemodel.cost.memory import memory_per_gpu, model_state_bytes
from scalemodel.cost.transformer import shape

# one gated layer, h 8, 2 heads of 4 (g = a), f 16, V 10, untied, RMSNorm gains, no biases:
# attention 4 h^2 = 256, MLP 3 h f = 384, two norms 2 h = 16 (a layer: 656), word embedding and output layer
# 2 V h = 160, final norm h = 8: 824 parameters
TINY = shape(layers=1, hidden=8, heads=2, ffn_hidden=16, vocab=10, gated_mlp=True, tied_embeddings=False,
             dropout=False)
PSI, LAYER, DP = 824.0, 656.0, 4.0
GATHERED = 2.0 * LAYER  # ZeRO-3 / FSDP: one layer gathered, one prefetched


def _states(**kw):
    b = memory_per_gpu(TINY, micro_batch=1, seq_len=4, dp=DP, zero_stage="fsdp", **kw)
    return float(b.weights), float(b.gradients), float(b.optimizer)


def test_fp32_built_model_holds_its_fp32_shard_as_the_master_and_an_fp32_gradient():
    # torchtitan: the model built fp32 (K = 12 counts that fp32 shard as the master), param_dtype bf16, reduce bf16:
    # the shard's gradient is fp32 (4 B), not the bf16 wire (2), and no bf16 shard is held (only the gathered copies)
    w, g, o = _states(grad_bytes=2.0, optimizer_bytes=12.0, fsdp2=True)
    assert w == pytest.approx(2.0 * GATHERED, rel=1e-12)
    assert g == pytest.approx(4.0 * PSI / DP, rel=1e-12)
    assert o == pytest.approx(12.0 * PSI / DP, rel=1e-12)
    # the same run priced as ZeRO-3 (DeepSpeed: a 16-bit partition beside the fp32 master, gradients at gb)
    w0, g0, _ = _states(grad_bytes=2.0, optimizer_bytes=12.0)
    assert w0 == pytest.approx(2.0 * PSI / DP + 2.0 * GATHERED, rel=1e-12)
    assert g0 == pytest.approx(2.0 * PSI / DP, rel=1e-12)


def test_bf16_built_model_keeps_bf16_gradients_whatever_the_reduce_dtype():
    # Automodel's Nemotron 3 Nano: built bf16 (Adam's m, v in bf16, K = 4, no master), reduce_dtype fp32: the sharded
    # gradient is cast back to bf16 (2 B), where it was counted at the fp32 wire (4 B)
    w, g, o = _states(grad_bytes=4.0, optimizer_bytes=4.0, fsdp2=True)
    assert w == pytest.approx(2.0 * PSI / DP + 2.0 * GATHERED, rel=1e-12)
    assert g == pytest.approx(2.0 * PSI / DP, rel=1e-12)
    assert o == pytest.approx(4.0 * PSI / DP, rel=1e-12)


def test_deferred_sync_accumulators_stay_at_the_reduce_dtype():
    # fsdp_defer_grad_sync over 4 micro-batches: every unit stays gathered (the whole 824 at 2 B), the unsharded
    # accumulators are upcast to reduce_dtype fp32 (to_accumulated_grad_if_needed): 4 x 824, beside the bf16 shard
    w, g, _ = _states(grad_bytes=4.0, optimizer_bytes=4.0, fsdp2=True, deferred_sync=True, num_microbatches=4)
    assert w == pytest.approx(2.0 * PSI / DP + 2.0 * PSI, rel=1e-12)
    assert g == pytest.approx(2.0 * PSI / DP + 4.0 * PSI, rel=1e-12)


def test_fsdp2_changes_nothing_below_full_sharding():
    # ZeRO 2 keeps a replicated 16-bit weight and gradients at gb whatever the flag (FSDP2 is zero fsdp / hsdp only)
    a = model_state_bytes(PSI, dp=DP, zero_stage=2, grad_bytes=4.0, fsdp2=True)
    assert float(a.weights) == pytest.approx(2.0 * PSI, rel=1e-12)
    assert float(a.gradients) == pytest.approx(4.0 * PSI / DP, rel=1e-12)


def test_engine_flags_fsdp2_for_fully_shard_strategies():
    """Through the engine (the `memory` command's path): fsdp_per_param drops the 16-bit shard (2 B a parameter on
    this GPU, over dp) and holds the gradient at fp32 (4 B) where the reduce dtype is bf16. The flag also keeps
    FSDP2's root unit gathered (the embedding, output layer and final norm, 2 V h + h: V 128256, h 4096, untied), 2 B
    each."""
    from scalemodel.commands.common import build_specs
    from scalemodel.engine.memory import memory

    out = {}
    for flag in (False, True):
        cl, wl, tr, st = build_specs(cluster="dgx-h100", model="llama3-8b", sets=["model.layers=4"],
                                     training={"micro_batch": 1, "grad_bytes_per_param": 2},
                                     strategy={"zero": "fsdp", "fsdp_per_param": flag})
        out[flag] = memory(cl, wl, 8, tr, st)
    psi = out[True].params_per_gpu
    assert out[False].params_per_gpu == psi
    on, off = out[True].per_gpu_bytes, out[False].per_gpu_bytes
    root = 2 * 128256 * 4096 + 4096
    assert on["weights"] - off["weights"] == pytest.approx(2.0 * root - 2.0 * psi / 8, rel=1e-9)
    assert on["gradients"] == pytest.approx(4.0 * psi / 8, rel=1e-12)
    assert off["gradients"] == pytest.approx(2.0 * psi / 8, rel=1e-12)
    assert on["optimizer"] == off["optimizer"] == pytest.approx(12.0 * psi / 8, rel=1e-12)


def test_named_tensor_offload_refused_on_a_hybrid_mamba_pattern(cli):  # type: ignore[no-untyped-def]
    """MaxText's names are attention-layer tensors; no framework offloads a Mamba-2 layer's by name (Megatron-Core's
    offload_modules has no Mamba module, transformer_config.py at NVIDIA/Megatron-LM@d98e8a64dd): exit 2, the field
    named, not a q/k/v width charged to every Mamba layer."""
    r = cli("memory", "-c", "dgx-h100", "-m", "nemotron-3-nano", "-n", "8", "--ep", "8", "--recompute", "selective",
            "--set", "strategy.offload_tensors=[query_proj]")
    assert r.code == 2
    assert "strategy.offload_tensors" in r.err and "Mamba" in r.err
    assert "Traceback" not in r.err


def test_named_tensor_offload_on_a_hybrid_grid_is_infeasible() -> None:
    """The grid's face of the refusal (plan and the wide property tests build grids without the spec check): a hybrid
    candidate with offload_tensors is offload_invalid, not priced with q, k, v widths on its Mamba layers."""
    from scalemodel.engine.step import Infeasible
    from tests.test_offload_hybrid import NANO
    from tests.test_physics_wide import _eval, _wide_job

    job = _wide_job("dgx-h100", "nemotron-3-nano", "bf16", None, 2048)
    res = _eval(job, dict(NANO, offload_layers=0, offload_tensors=1))
    assert int(res.reason[0]) == int(Infeasible.OFFLOAD_INVALID), res.reason
