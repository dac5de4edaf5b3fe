"""`scalemodel memory` reports the parameters of the pipeline stage whose memory it prices (the peak, the stage the
feasibility verdict uses) and says which stage that is; values computed by hand from the published shapes."""

from __future__ import annotations

import json

import pytest

# DeepSeek-V3 (HF config.json of deepseek-ai/DeepSeek-V3; examples/workloads/deepseek-v3.yaml): hidden, vocab, heads,
# MLA dims (q_nope, q_rope, v, q_lora, kv_lora), dense FFN width, expert width, routed experts
H, V, NH, QN, QR, VD, RQ, RKV, F, FE, E = 7168, 129280, 128, 128, 64, 128, 1536, 512, 18432, 2048, 256
ATTN = (H * RQ + RQ + RQ * NH * (QN + QR)           # q_a_proj, q_a_layernorm, q_b_proj
        + H * (RKV + QR) + RKV + RKV * NH * (QN + VD)  # kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj
        + NH * VD * H)                                 # o_proj
NORMS = 2 * H                      # input and post-attention RMSNorm gains
EXPERT = 3 * H * FE                # one gated expert
NON_ROUTED = EXPERT + H * E        # the shared expert + the router of an MoE layer
BODY = 61 * (ATTN + NORMS) + 3 * 3 * H * F + 58 * NON_ROUTED  # 3 dense layers, 58 MoE layers (routed apart)


def _doc(cli, *args: str) -> dict:  # type: ignore[no-untyped-def]
    r = cli("memory", *args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_deepseek_v3_mtp_last_stage_is_reported(cli) -> None:  # type: ignore[no-untyped-def]
    """pp 2, ep 8, tp 1 (dp 8 on 16 GPUs): the balanced split puts 31 layers on the first stage and 30 on the last
    (params_per_gpu takes dense and MoE layers in proportion, 30/61 of each). The last stage also holds the MTP
    module (one MoE layer, eh_proj 2h x h, three norms), the output layer V h and MTP's copy of the embedding
    V h; its routed experts (30/61 x 58 layers + the module's, 256 each) split over ep 8. That is 51.30e9
    parameters per GPU against the first stage's 50.22e9, and with one micro-batch in flight on each, the last
    stage (with two heads' logits) has the peak."""
    last = (BODY * 30 / 61 + 2 * V * H + (ATTN + NORMS + NON_ROUTED + 2 * H * H + 3 * H)
            + (58 * 30 / 61 * E * EXPERT + E * EXPERT) / 8)
    first = BODY * 31 / 61 + V * H + 58 * 31 / 61 * E * EXPERT / 8
    assert last == pytest.approx(51_304_749_912.13, rel=1e-12) and first < last
    doc = _doc(cli, "-m", "deepseek-v3", "-c", "dgx-h100", "-n", "16", "--pp", "2", "--ep", "8")
    assert doc["peak_stage"] == {"rank": 1, "role": "last"}
    assert doc["params_per_gpu"] == pytest.approx(last, rel=1e-12)
    # the bytes are of the same stage: no ZeRO, BF16 weights = 2 bytes per parameter held
    assert doc["per_gpu_bytes"]["weights"] == pytest.approx(2 * last, rel=1e-12)


def test_busiest_middle_stage_and_first_stage(cli) -> None:  # type: ignore[no-untyped-def]
    """Llama 3 8B (h 4096, 32 heads, 8 KV heads of 128, FFN 14336, vocab 128256 untied): one layer is
    2 h^2 + 2 h 1024 + 2 h + 3 h 14336 = 218,112,000 parameters. pp 4 with first_stage_layers 2 leaves 10 layers on
    each later stage: the middle stage (rank 1) has the peak, 10 layers and no embedding; pp 2 balanced: the first
    stage, 16 layers + the embedding 128256 x 4096."""
    layer = 2 * 4096**2 + 2 * 4096 * 1024 + 2 * 4096 + 3 * 4096 * 14336
    assert layer == 218_112_000
    mid = _doc(cli, "-m", "llama3-8b", "-c", "dgx-h100", "-n", "32", "--pp", "4",
               "--set", "strategy.first_stage_layers=2")
    assert mid["peak_stage"] == {"rank": 1, "role": "middle"}
    assert mid["params_per_gpu"] == pytest.approx(10 * layer, rel=1e-12)
    first = _doc(cli, "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--pp", "2")
    assert first["peak_stage"] == {"rank": 0, "role": "first"}
    assert first["params_per_gpu"] == pytest.approx(16 * layer + 128256 * 4096, rel=1e-12)
    only = _doc(cli, "-m", "llama3-8b", "-c", "dgx-h100", "-n", "8")
    assert only["peak_stage"] == {"rank": 0, "role": "only"}


def test_table_names_the_stage(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("memory", "-m", "deepseek-v3", "-c", "dgx-h100", "-n", "16", "--pp", "2", "--ep", "8")
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    assert "a GPU of the last pipeline stage (rank 1 of pp 2" in text and "5.13e+10" in text


def test_uneven_split_is_accepted_as_predict_accepts_it(cli) -> None:  # type: ignore[no-untyped-def]
    """61 layers over pp 4 (16/15/15/15, predict's balanced split) are priced, not refused; pp 64 (more stages
    than layers) is refused."""
    assert _doc(cli, "-m", "deepseek-v3", "-c", "dgx-h100", "-n", "32", "--pp", "4", "--ep", "8")["peak_stage"][
        "role"] in ("first", "last")
    r = cli("memory", "-m", "deepseek-v3", "-c", "dgx-h100", "-n", "64", "--pp", "64")
    assert r.code == 2 and r.err.startswith("error: --pp: ") and r.err.count("\n") == 1
