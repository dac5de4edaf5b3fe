"""The stage with the output layer keeps the final norm's and output layer's inputs for the backward.

Korthikanti et al. 2022 (arXiv:2205.05198) §4.3: with sequence parallelism the layer norm before the output layer
needs 2sbh/t and the output layer projection 2sbh/t, beside the fp32 cross entropy's 4sbv/t (4sbh/t (1 + v/h) in
all). Without sequence parallelism each tp rank holds the whole 16-bit inputs, 4sbh. Hand values on a toy shape:
h 8, V 10, s 4, b 2, t 2.
"""

from __future__ import annotations

from typing import Any

import pytest

from scalemodel.cost import memory, transformer

S, B, H, V, T = 4, 2, 8, 10, 2


def _shape() -> transformer.Shape:
    return transformer.shape(layers=4, hidden=H, heads=2, vocab=V, ffn_hidden=16, gated_mlp=True,
                             tied_embeddings=False, dropout=False)


def _head_delta(**kw: Any) -> float:
    """Activation bytes of the last of two stages with the output layer minus without it."""
    args: dict[str, Any] = dict(micro_batch=B, seq_len=S, tp=T, pp=2, stage_rank=1, embedding=False, **kw)
    sh = _shape()
    return float(memory.activation_bytes(sh, head=True, **args) - memory.activation_bytes(sh, head=False, **args))


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_last_stage_keeps_head_inputs_with_sequence_parallelism(recompute: str) -> None:
    # logits 4 s b V / t = 4 x 4 x 2 x 10 / 2 = 160; norm + output-layer inputs 2 x 2 s b h / t = 4x4x2x8 / 2 = 128
    assert _head_delta(sequence_parallel=True, recompute=recompute) == pytest.approx(160.0 + 128.0, rel=1e-12)


def test_last_stage_keeps_whole_head_inputs_without_sequence_parallelism() -> None:
    # every tp rank holds the whole 16-bit inputs: 4 s b h = 4 x 4 x 2 x 8 = 256
    assert _head_delta(sequence_parallel=False) == pytest.approx(160.0 + 256.0, rel=1e-12)


def test_gpipe_holds_every_micro_batch_head_inputs() -> None:
    # GPipe, m 3: every forward before any backward, so 3 micro-batches' logits and inputs
    delta = _head_delta(sequence_parallel=True, schedule="gpipe", num_microbatches=3)
    assert delta == pytest.approx(3 * (160.0 + 128.0), rel=1e-12)


def test_single_stage_holds_them_too() -> None:
    """p = 1: the only stage has the output layer (Korthikanti §4.3's delta_{p=1} term): its activations are its
    layers + the logits + the head inputs (no dropout, so no embedding mask)."""
    sh = _shape()
    kw: dict[str, Any] = dict(micro_batch=B, seq_len=S, tp=T, sequence_parallel=True)
    layers = 4 * float(memory.activation_bytes_per_layer(sh, **kw))
    total = float(memory.activation_bytes(sh, pp=1, **kw))
    assert total == pytest.approx(layers + 160.0 + 128.0, rel=1e-12)


def test_head_input_bytes_by_hand() -> None:
    sh = _shape()
    assert float(memory.head_input_bytes(sh, micro_batch=B, seq_len=S, tp=T, sequence_parallel=True)) == 128.0
    assert float(memory.head_input_bytes(sh, micro_batch=B, seq_len=S, tp=T)) == 256.0
    # one MTP module feeds the output layer once more: + 2 s b h / t = 2 x 4 x 2 x 8 / 2 = 64
    assert float(memory.head_input_bytes(sh, micro_batch=B, seq_len=S, tp=T, sequence_parallel=True,
                                         mtp_modules=1)) == 192.0
