"""Per-GPU memory model (scalemodel.cost.memory) against the ZeRO paper and Korthikanti Table 2."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.memory import (
    BYTES_PER_PARAM,
    activation_bytes,
    activation_bytes_per_layer,
    fits,
    inflight_microbatches,
    max_micro_batch,
    memory_per_gpu,
    model_state_bytes,
    params_per_gpu,
)
from scalemodel.cost.transformer import param_count, shape
from scalemodel.errors import InputError

GPT3 = shape(layers=96, hidden=12288, heads=96, vocab=51200)


def test_zero_paper_example_7_5b_on_64_gpus():
    # Rajbhandari et al. 2019 Figure 1: Psi = 7.5 B, N_d = 64, K = 12.
    psi, nd = 7.5e9, 64
    expected_gb = {0: 16 * psi, 1: 4 * psi + 12 * psi / nd, 2: 2 * psi + 14 * psi / nd, 3: 16 * psi / nd}
    published_gb = {0: 120, 1: 31.4, 2: 16.6, 3: 1.9}
    for stage, by_hand in expected_gb.items():
        got = float(model_state_bytes(psi, dp=nd, zero_stage=stage).total)
        assert got == pytest.approx(by_hand, rel=1e-12)
        assert got / 1e9 == pytest.approx(published_gb[stage], abs=0.05)
    assert float(model_state_bytes(psi, dp=nd, zero_stage="fsdp").total) == pytest.approx(16 * psi / nd)


def test_megatron_18_bytes_and_distributed_optimizer():
    wb, gb, k = BYTES_PER_PARAM["megatron"]
    assert wb + gb + k == 18
    st = model_state_bytes(1e9, dp=8, zero_stage=1, weight_bytes=wb, grad_bytes=gb, optimizer_bytes=k)
    assert float(st.total) == pytest.approx((6 + 12 / 8) * 1e9)  # Megatron: 6 + 12/d


S, B, H, A = 2048, 1, 12288, 96


def test_korthikanti_table2_rows_by_hand():
    kw = dict(micro_batch=B, seq_len=S)
    sbh = S * B * H
    t = 8
    rows = {
        ("none", 1, False): sbh * (34 + 5 * A * S / H),
        ("none", t, False): sbh * (10 + 24 / t + 5 * A * S / (H * t)),
        ("none", t, True): sbh / t * (34 + 5 * A * S / H),
        ("selective", t, False): sbh * (10 + 24 / t),
        ("selective", t, True): 34 * sbh / t,
        ("full", t, False): 2 * sbh,
        ("full", t, True): 2 * sbh / t,
    }
    for (rc, tp, sp), by_hand in rows.items():
        got = float(activation_bytes_per_layer(GPT3, tp=tp, sequence_parallel=sp, recompute=rc, **kw))
        assert got == pytest.approx(by_hand, rel=1e-12), (rc, tp, sp)


def test_korthikanti_175b_activation_totals():
    # GPT-3 175B, t 8, p 8, b 1: 1F1B first stage holds p = 8 micro-batches of L/p = 12 layers.
    # SP + selective: 34 sbh / t per layer, plus the embedding dropout mask sbh / t per micro-batch.
    sbh = S * B * H
    layers_stage, inflight = 96 / 8, 8
    per_layer = 34 * sbh / 8
    emb = sbh / 8  # embedding dropout mask, per in-flight micro-batch (with SP)
    by_hand = (layers_stage * per_layer + emb) * inflight
    got = activation_bytes(GPT3, micro_batch=B, seq_len=S, tp=8, pp=8, sequence_parallel=True,
                           recompute="selective", num_microbatches=64)
    assert float(got) == pytest.approx(by_hand, rel=1e-12)
    # Korthikanti §6.1: sequence parallel + selective needs ~1/5 of the no-recompute memory
    none = activation_bytes(GPT3, micro_batch=B, seq_len=S, tp=8, pp=8, recompute="none", num_microbatches=64)
    assert 3.5 < float(none) / float(got) < 6.5


def test_inflight_microbatches_per_schedule():
    p, m, v = 8, 96, 3
    assert float(inflight_microbatches(p, m, "1f1b")) == 8
    assert float(inflight_microbatches(p, m, "interleaved", v)) == pytest.approx(8 * (1 + 7 / 24))
    assert float(inflight_microbatches(p, m, "gpipe")) == 96
    assert float(inflight_microbatches(p, 4, "1f1b")) == 4  # fewer micro-batches than stages
    assert float(inflight_microbatches(1, 96, "gpipe")) == 1


def test_params_per_gpu_sum_to_total():
    # tp 8, pp 1: every GPU holds 1/8 of the split weights and all of the ones Megatron-Core keeps whole on each TP
    # rank: per layer the two LayerNorms' gains and biases (4h) and the biases of the two row-parallel linears
    # (O-proj, FC2: 2h), and the final LayerNorm (2h); no learned position table in this shape
    pg = params_per_gpu(GPT3, tp=8, pp=1)
    whole = (96 * 6 + 2) * 12288
    assert float(pg.total) == pytest.approx((float(param_count(GPT3)) - whole) / 8 + whole, rel=1e-12)
    # MoE: experts split over ep; 8 experts on ep 4 -> 2 experts per GPU
    moe = shape(layers=4, hidden=1024, heads=8, vocab=1000, gated_mlp=True, moe_experts=8, moe_top_k=2,
                moe_ffn_hidden=2048)
    pg = params_per_gpu(moe, ep=4)
    assert float(pg.expert) == pytest.approx(4 * 2 * 3 * 1024 * 2048)


def test_max_micro_batch_is_the_largest_that_fits():
    cap = 80e9
    kw = dict(seq_len=2048, dp=16, tp=8, pp=8, zero_stage=1, recompute="selective", sequence_parallel=True,
              num_microbatches=96)
    one = memory_per_gpu(GPT3, micro_batch=1, **kw)
    bmax = int(max_micro_batch(one.states, one.activations, cap))
    assert bmax >= 1
    at = memory_per_gpu(GPT3, micro_batch=bmax, **kw)
    above = memory_per_gpu(GPT3, micro_batch=bmax + 1, **kw)
    assert bool(fits(at.total, cap)) and not bool(fits(above.total, cap))


def test_memory_breakdown_broadcasts_and_zero_reduces_states():
    m = memory_per_gpu(GPT3, micro_batch=1, seq_len=2048, dp=64, tp=8, pp=8, zero_stage=np.array([0, 1, 2, 3]))
    assert m.total.shape == (4,)
    assert np.all(np.diff(m.states) < 0)
    assert np.all(np.isfinite(m.total))


def test_bad_inputs_raise():
    with pytest.raises(InputError):
        model_state_bytes(1e9, dp=0)
    with pytest.raises(InputError):
        model_state_bytes(1e9, zero_stage="4")
    with pytest.raises(InputError):
        inflight_microbatches(8, 16, "zigzag")


def test_cli_memory_json_matches_hand_computation(cli):
    import json

    r = cli("memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1024", "--tp", "8", "--pp", "8",
            "--zero", "1", "--recompute", "selective", "--sequence-parallel", "--global-batch", "1536",
            "--no-flash-attention", "--json")  # Korthikanti's Table 2 predates fused attention
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["command"] == "memory" and doc["inputs"]["dp"] == 16
    # activations: 12 layers x 34 sbh/t x 8 in flight + embedding mask sbh/t x 8 (s 2048, h 12288, t 8)
    sbh_t = 2048 * 12288 / 8
    assert doc["per_gpu_bytes"]["activations"] == pytest.approx((12 * 34 * sbh_t + sbh_t) * 8, rel=1e-9)
    br = doc["per_gpu_bytes"]
    assert br["total"] == pytest.approx(sum(v for k, v in br.items() if k != "total"), rel=1e-12)
    assert doc["fits"] is True and doc["max_micro_batch"] >= 1


def test_cli_memory_bad_input_exits_2(cli):
    r = cli("memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "100", "--tp", "8")
    assert r.code == 2 and "error:" in r.err and "--gpus" in r.err
    r = cli("memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "8", "--recompute", "maybe")
    assert r.code == 2 and "recompute" in r.err


def test_nothing_fits_names_the_activations_when_the_states_fit(cli):
    """Llama 3 70B at TP 8, ZeRO-1, dp 8, a global batch of 64 (m = 8): no micro-batch fits, but not because of the
    model states (the message said "model states alone exceed the memory"). By hand: 70.55e9 params / 8 = 8.82e9 on
    a GPU; bf16 weights and gradients 2 + 2 bytes, Adam's 12 bytes sharded over dp 8 = 1.5; (8.82e9 x 5.5) x 1.05
    + 1 GB = 51.9 GB < the H100's 81559 MiB = 85.52 GB, so the activations at micro-batch 1 are what does not fit."""
    import json

    args = ("memory", "-c", "dgx-h100", "-m", "llama3-70b", "-n", "64", "--tp", "8", "--global-batch", "64",
            "--zero", "1")
    doc = json.loads(cli(*args, "--json").out)
    assert doc["max_micro_batch"] == 0
    states = doc["params_per_gpu"] * (2 + 2 + 12 / 8)
    assert states * 1.05 + 1e9 == pytest.approx(51.9e9, rel=0.01)
    out = " ".join(cli(*args).out.split())
    assert "model states alone" not in out
    held = states * 1.05 + 1e9
    assert "activations at micro-batch 1 do not fit" in out and f"{(85045477376 - held) / 1e9:.2f} GB left" in out
    # the states alone: GPT-3 175B on one node at TP 8 without ZeRO (175e9 / 8 x 16 bytes = 350 GB)
    out = " ".join(cli("memory", "-c", "dgx-a100", "-m", "gpt3-175b", "-n", "8", "--tp", "8",
                       "--global-batch", "8").out.split())
    # 81920 MiB less the 799277056 B the driver keeps: deviceQuery's 85100068864 B = 85.10e9 B ([NVSMI])
    assert "model states alone" in out and "exceed the 85.1 GB" in out


def test_nothing_fits_offers_only_levers_not_in_use(cli):
    """Llama 3 405B at 262,144 tokens, TP 8 PP 8, full recompute, SP and ZeRO-1 on 1024 H100s: no micro-batch fits,
    and the hint said 'try recompute, sequence parallelism, more TP or CP', two of which the job already runs. The
    lever left is a higher ZeRO stage: ZeRO-2 shards the bf16 gradients (2 bytes x 6.24e9 params = 12.5 GB on the
    peak stage) over dp 16, and the same job then fits at micro-batch 1 (checked below by the command itself)."""
    import json

    base = ("memory", "-c", "dgx-h100", "-m", "llama3-405b", "-n", "1024", "--tp", "8", "--pp", "8",
            "--micro-batch", "1", "--sequence-parallel", "--recompute", "full", "--seq-len", "262144")
    out = " ".join(cli(*base, "--zero", "1").out.split())
    hint = out.split("try ", 1)[1]
    assert "recompute" not in hint and "sequence parallelism" not in hint
    assert "a ZeRO stage above 1" in hint and "more TP or CP" in hint
    assert json.loads(cli(*base, "--zero", "2", "--json").out)["max_micro_batch"] >= 1
    # nothing in use: every lever is named; ZeRO-0 at dp 16 offers ZeRO
    out = " ".join(cli("memory", "-c", "dgx-h100", "-m", "llama3-70b", "-n", "256", "--tp", "8", "--pp", "2",
                       "--micro-batch", "1", "--global-batch", "256").out.split())
    assert out.endswith("try recompute (selective or full), sequence parallelism, ZeRO or more TP or CP")
    # the states alone at dp 1 (GPT-3 175B on one node, TP 8): ZeRO shards nothing there, so it is not offered
    out = " ".join(cli("memory", "-c", "dgx-a100", "-m", "gpt3-175b", "-n", "8", "--tp", "8",
                       "--global-batch", "8").out.split())
    assert out.endswith("exceed the 85.1 GB; try more TP or PP")


def test_nothing_fits_under_hsdp_offers_fsdp(cli):
    """Llama 3 70B on 16 H100s (2 nodes) under --zero hsdp: the default shard group is a node's 8 replicas, so each
    GPU holds 1/8 of the 16-byte states (bf16 weights and gradients, 12 bytes of Adam), over the 85.05 GB; the hint
    said 'try a ZeRO stage above hsdp', a stage that does not exist. FSDP over all 16 replicas halves them (1/16;
    checked by the command's own breakdown below)."""
    import json

    base = ("memory", "-c", "dgx-h100", "-m", "llama3-70b", "-n", "16", "--micro-batch", "1")
    out = " ".join(cli(*base, "--zero", "hsdp").out.split())
    assert out.endswith("try zero fsdp (hsdp shards the states over its shard group only) or more TP or PP"), out
    hsdp, fsdp = (json.loads(cli(*base, "--zero", z, "--json").out)["per_gpu_bytes"] for z in ("hsdp", "fsdp"))
    states = {z: b["weights"] + b["gradients"] + b["optimizer"] for z, b in (("hsdp", hsdp), ("fsdp", fsdp))}
    assert states["hsdp"] > 85.045e9
    # Adam's 12 bytes of Llama 3 70B's 70.6e9 parameters (Meta's count) over 8, then over 16 shards
    assert hsdp["optimizer"] == pytest.approx(70.6e9 * 12 / 8, rel=0.005)
    assert fsdp["optimizer"] == pytest.approx(70.6e9 * 12 / 16, rel=0.005)
