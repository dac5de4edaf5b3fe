"""mem31b: a 32-bit transformer's activations at its element size (docs/model.md#activations, "32-bit runs").

Korthikanti et al. 2022 (arXiv:2205.05198) Sec. 4.1 count a layer at 16 bits, 34 s b h + 5 a s^2 b: 2-byte activations
and 1-byte dropout masks. In an fp32 / tf32 run every 2-byte tensor is a 4-byte one and the masks stay 1 byte; flash
attention's log-sum-exp is fp32 in every dtype. Term by term, with e = 4 (s b h units unless stated, f = 4h):

    attention block  QKV input e, Q e, K e, V e, O-projection input e, dropout mask 1           = 5e + 1 = 21
                     scores a s^2 b: softmax output e, dropout mask 1, dropout output e         = 2e + 1 = 9
    MLP block        input e, GeLU input 4e, GeLU output 4e, dropout mask 1                     = 9e + 1 = 37
    two norms        input e each                                                               = 2e     = 8
    sum              (16e + 2) s b h + (2e + 1) a s^2 b = 66 s b h + 9 a s^2 b   (e = 2: 34 and 5, Table 2)

Replicated (not split by t without sequence parallelism): the norms, QKV and MLP inputs and masks, 4e + 2 = 18;
split by t: Q, K, V, O input and the MLP's 8e, 12e = 48. Full recompute keeps the layer input, e s b h = 4 s b h.
Before mem31b every element-sized term was 2 bytes whatever the precision.
"""

from __future__ import annotations

import json

import pytest
from msgspec.structs import replace

from scalemodel.cost.mamba import mamba_dims
from scalemodel.cost.memory import activation_bytes_per_layer, head_input_bytes, mamba_activation_bytes
from scalemodel.cost.transformer import shape
from scalemodel.engine import dp_comm
from tests.test_offload29 import ALL, _job_grid

# a small GPT layer (Korthikanti's GPT: f = 4h, g = a, biased LayerNorm, dropout)
S, B, H, A, T = 512, 2, 256, 8, 4
GPT = shape(layers=2, hidden=H, heads=A, vocab=1000)
SBH = S * B * H
AS2B = A * S * S * B


def _layer(e: float, **kw: object) -> float:
    return float(activation_bytes_per_layer(GPT, micro_batch=B, seq_len=S, elem_bytes=e, **kw))


@pytest.mark.parametrize(("e", "per_sbh", "per_as2b"), [(4.0, 66, 9), (2.0, 34, 5)])
def test_korthikanti_layer_at_the_element_size(e: float, per_sbh: int, per_as2b: int) -> None:
    """One layer, t = 1, no recompute, no flash attention: the term-by-term sums of the module docstring."""
    attention, scores, mlp, norms = 5 * e + 1, 2 * e + 1, 9 * e + 1, 2 * e
    assert (attention + mlp + norms, scores) == (per_sbh, per_as2b)
    assert _layer(e) == pytest.approx(per_sbh * SBH + per_as2b * AS2B, rel=1e-12)


@pytest.mark.parametrize(("rc", "sp", "flash", "by_hand"), [
    ("none", False, False, 18 * SBH + (48 * SBH + 9 * AS2B) / T),
    ("none", True, False, (66 * SBH + 9 * AS2B) / T),
    ("selective", False, False, 18 * SBH + 48 * SBH / T),   # the scores recomputed (Korthikanti Sec. 5)
    ("selective", True, False, 66 * SBH / T),
    ("none", False, True, 18 * SBH + (48 * SBH + 4 * A * S * B) / T),  # flash: the fp32 log-sum-exp, 4 a s b
    ("selective", True, True, (66 * SBH + 4 * A * S * B) / T),  # flash keeps its log-sum-exp under core_attn
    ("full", False, False, 4 * SBH),
    ("full", True, True, 4 * SBH / T),
])
def test_32_bit_rows_by_hand(rc: str, sp: bool, flash: bool, by_hand: float) -> None:
    """Korthikanti's Table 2 rows with 4-byte elements and 1-byte masks, t = 4, with and without flash attention."""
    assert _layer(4.0, tp=T, sequence_parallel=sp, recompute=rc, flash_attention=flash) == pytest.approx(
        by_hand, rel=1e-12)


def test_head_inputs_at_the_element_size() -> None:
    """The final norm's and output layer's inputs (Korthikanti Sec. 4.3, 2sbh/t each at 16 bits): 4 s b h each at
    e = 4, 8 s b h / t with sequence parallelism; one more MTP module's input 4 s b h."""
    got = float(head_input_bytes(GPT, micro_batch=B, seq_len=S, tp=T, sequence_parallel=True, elem_bytes=4.0))
    assert got == pytest.approx(8 * SBH / T, rel=1e-12)
    got = float(head_input_bytes(GPT, micro_batch=B, seq_len=S, mtp_modules=1, elem_bytes=4.0))
    assert got == pytest.approx(12 * SBH, rel=1e-12)


def test_mamba_layer_at_the_element_size() -> None:
    """A Mamba layer (no dropout, t = 1): layer input e + in_proj input e (s b h), zxbcdt e x in_proj width,
    out_x and the norm's copy 2e x d_inner, out_proj input e x d_inner; e = 4 doubles every term."""
    md = mamba_dims(hidden=H, state_dim=16, head_dim=32, groups=1)
    by_hand = S * B * (8 * H + 4 * md.in_proj_width + 12 * md.d_inner)
    got = float(mamba_activation_bytes(md, micro_batch=B, seq_len=S, elem_bytes=4.0))
    assert got == pytest.approx(by_hand, rel=1e-12)
    full = float(mamba_activation_bytes(md, micro_batch=B, seq_len=S, recompute="full", elem_bytes=4.0))
    assert full == 4 * S * B * H


def _cli_activations(cli, precision: str) -> float:  # type: ignore[no-untyped-def]
    r = cli("memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1024", "--tp", "8", "--pp", "8",
            "--zero", "1", "--recompute", "selective", "--sequence-parallel", "--global-batch", "1536",
            "--no-flash-attention", "--precision", precision, "--json")
    assert r.code == 0, r.err
    return float(json.loads(r.out)["per_gpu_bytes"]["activations"])


def test_cli_memory_fp32_counts_4_byte_activations(cli) -> None:  # type: ignore[no-untyped-def]
    """GPT-3 175B, t 8, p 8, SP + selective, first stage (12 layers, 8 micro-batches in flight): 66 s b h / t a layer
    at fp32 (34 at bf16), and the embedding's 1-byte dropout mask s b h / t either way."""
    sbh_t = 2048 * 12288 / 8
    assert _cli_activations(cli, "bf16") == pytest.approx((12 * 34 * sbh_t + sbh_t) * 8, rel=1e-9)
    assert _cli_activations(cli, "fp32") == pytest.approx((12 * 66 * sbh_t + sbh_t) * 8, rel=1e-9)


def test_offloaded_tensors_are_the_counted_tensors_in_a_32_bit_run() -> None:
    """MaxText's jax_qkvo policy keeps the layer input, out_proj, Q, K, V (4 bytes each element at fp32); offloading
    all five sends exactly the bytes the memory model counts for the layer (2 x the 16-bit run's 939,524,096 B)."""
    names = ("decoder_layer_input", "query_proj", "key_proj", "value_proj", "out_proj")
    job, g = _job_grid(names)
    job32 = replace(job, elem_bytes=4.0)
    sent = float(dp_comm.offloaded_tensor_bytes(job32, g)[0])
    kept = float(activation_bytes_per_layer(job.shape, micro_batch=g.micro_batch, seq_len=job.seq_len,
                                            recompute="selective", recompute_modules=g.recompute_modules,
                                            elem_bytes=4.0)[0])
    assert sent == pytest.approx(2 * ALL, rel=1e-12)
    assert kept == pytest.approx(2 * ALL, rel=1e-12)


def test_offload_tensors_accepted_in_a_32_bit_run(cli) -> None:  # type: ignore[no-untyped-def]
    """tf32 on DGX H100 (host link PCIe Gen5): refused before mem31b (tests/test_mem30.py, "16 bits"), priced now."""
    r = cli("predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--set", "training.precision=tf32",
            "--set", "strategy.offload_tensors=[query_proj,key_proj]", "--set", "strategy.recompute=selective",
            "--set", "strategy.recompute_modules=jax_qkvo", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["step_time_s"] > 0
