"""Transformer Engine's context-parallel P2P ring bookkeeping (compute.cp_ring_bytes, docs/model.md#cp-ring-bytes):
bytes per layer on rank cp - 1 against op lists written out from AttnFuncWithCPAndKVP2P at TE v2.1 (sbhd, 16-bit),
one entry per tensor pass, and the seconds layer_compute_time adds for a Megatron-Core (megatron_te) core only."""

from __future__ import annotations

import pytest

from scalemodel.cost.compute import cp_ring_bytes, layer_compute_time
from scalemodel.cost.transformer import shape

E = 2.0
LLAMA3_8B = dict(layers=32, hidden=4096, heads=32, kv_heads=8, vocab=128_000, ffn_hidden=14336, gated_mlp=True,
                 dropout=False)


def _llama(**kw: object) -> object:
    return shape(**{**LLAMA3_8B, **kw})  # type: ignore[arg-type]


def test_cp2_causal_rank1_by_op_list() -> None:
    """b 1, s 8192, cp 2, t 1: T = 4096 tokens; O = T x 32 x 128, KV = T x 8 x (128 + 128)."""
    O, KV = 4096 * 32 * 128, 4096 * 8 * 256
    fwd = [("out = zeros_like(q): write", E * O),
           ("merge step 0 (i <= rank: whole): read step output, read running, write", 3 * E * O),
           ("merge step 1 (whole)", 3 * E * O)]
    bwd = [("p2p_comm_buffers[0][0].copy_(kv): read, write", 2 * E * KV),
           ("step 0: dq.copy_(dq_) (i == cp - rank - 1 and rank == cp - 1)", 2 * E * O),
           ("step 1: dq.add_(dq_): read 2, write 1", 3 * E * O),
           ("step 0: dkv[0].copy_(dkv_) half block", 2 * E * KV / 2),
           ("step 1 (= cp - 1, rank != 0): dkv.add_(dkv_) whole", 3 * E * KV)]
    f, b = cp_ring_bytes(_llama(), micro_batch=1, seq_len=8192, cp=2)
    assert float(f) == pytest.approx(sum(x for _, x in fwd)) == pytest.approx(234_881_024)
    assert float(b) == pytest.approx(sum(x for _, x in bwd)) == pytest.approx(268_435_456)


def test_cp4_causal_and_bidirectional_by_op_list() -> None:
    """cp 4, tp 2, b 2, s 8192: T = 4096, O = T x 32 x 128 / 2, KV = T x 8 x 256 / 2; rank 3."""
    O, KV = 4096 * 32 * 128 / 2, 4096 * 8 * 256 / 2
    fwd = E * O + 4 * 3 * E * O  # zeros, four whole merges
    bwd_causal = (2 * E * KV  # the KV copy into the send buffer
                  + 2 * E * O + 3 * 3 * E * O  # dq: copy, then three adds
                  + E * KV + 2 * 1.5 * E * KV + 3 * E * KV)  # dkv: half copy, two half adds, one whole add
    f, b = cp_ring_bytes(_llama(), micro_batch=2, seq_len=8192, tp=2, cp=4)
    assert float(f) == pytest.approx(fwd) and float(b) == pytest.approx(bwd_causal)
    # bidirectional: every dkv step is the whole block (copy 2e, then three adds 3e)
    f, b = cp_ring_bytes(_llama(causal=False), micro_batch=2, seq_len=8192, tp=2, cp=4)
    assert float(f) == pytest.approx(fwd)
    assert float(b) == pytest.approx(2 * E * KV + 2 * E * O + 9 * E * O + 2 * E * KV + 3 * 3 * E * KV)


def test_no_ring_without_context_parallelism() -> None:
    f, b = cp_ring_bytes(_llama(), micro_batch=1, seq_len=8192, cp=1)
    assert float(f) == 0.0 and float(b) == 0.0


def test_layer_time_adds_the_ring_for_megatron_te_only() -> None:
    """The same layer with FP8 dot-product attention (TE's FP8 ring path, not priced: no ring bytes) is the
    reference; in a global-attention model fp8_attention changes nothing else (its backward keys are the causal
    keys either way)."""
    hbm = 3.35e12 * 0.88  # H100 SXM: 3.35 TB/s x 0.88 (hardware/accelerators/h100-sxm.yaml)
    run = dict(micro_batch=1, seq_len=8192, peak_flops=989.4e12, memory_bandwidth=3.35e12, memory_efficiency=0.88,
               flash_attention=True, cp=2)
    sh = _llama()
    f, b = 234_881_024 / hbm, 268_435_456 / hbm  # the cp 2 op lists above

    def lt(**kw: object) -> object:
        return layer_compute_time(sh, **{**run, **kw})  # type: ignore[arg-type]

    te, ref = lt(layer_impl="megatron_te"), lt(layer_impl="megatron_te", fp8_attention=True)
    assert float(te.forward - ref.forward) == pytest.approx(f)
    assert float(te.attention_core - ref.attention_core) == pytest.approx(f)
    assert float(te.backward - ref.backward) == pytest.approx(b)
    # selective recompute of core_attn repeats the ring's forward passes with the core
    sel, sel_ref = (lt(layer_impl="megatron_te", recompute="selective", fp8_attention=x) for x in (False, True))
    assert float(sel.recompute - sel_ref.recompute) == pytest.approx(f)
    # other implementations (torchtitan's context_parallel) and an unfused core: no ring priced
    for kw in ({"layer_impl": "torchtitan"}, {"layer_impl": "megatron_te", "flash_attention": False}):
        a, c = lt(**kw), lt(fp8_attention=True, **kw)
        assert float(a.forward) == pytest.approx(float(c.forward))
        assert float(a.backward) == pytest.approx(float(c.backward))
