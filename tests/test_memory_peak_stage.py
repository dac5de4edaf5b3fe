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


def _doc(cli, *args: str) -> dict:  # type: ignore[no-untyped-def]
    r = cli("memory", *args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_deepseek_v3_mtp_last_stage_is_reported(cli) -> None:  # type: ignore[no-untyped-def]
    """pp 2, ep 8, tp 1 (dp 8 on 16 GPUs): the balanced split puts 31 layers on the first stage and 30 on the last,
    in order (Megatron-Core builds a rank's layers in order and each layer's MLP kind from its global number): the
    first stage layers 0-30, the 3 dense ones (first_k_dense_replace 3) and 28 MoE layers, the last layers 31-60,
    30 MoE layers (until a later review each stage held dense and MoE layers in proportion, 30/61 of each, and the
    last stage was priced at 51.30e9). The last stage also holds the MTP module (one MoE layer, eh_proj 2h x h,
    three norms), the output layer V h, the model's final RMSNorm h (Megatron-Core's final_layernorm, on the
    post-process stage) and MTP's copy of the embedding V h; its routed experts (30 MoE layers + the module's, 256
    each) split over ep 8. That is 52.87e9 parameters per GPU against the first stage's 48.66e9, and with one
    micro-batch in flight on each, the last stage (with two heads' logits) has the peak."""
    last = (30 * (ATTN + NORMS + NON_ROUTED) + 2 * V * H + H + (ATTN + NORMS + NON_ROUTED + 2 * H * H + 3 * H)
            + (30 * E * EXPERT + E * EXPERT) / 8)
    first = 31 * (ATTN + NORMS) + 3 * 3 * H * F + 28 * NON_ROUTED + V * H + 28 * E * EXPERT / 8
    assert last == pytest.approx(52_866_920_448, rel=1e-12) and first == pytest.approx(48_661_053_440, rel=1e-12)
    doc = _doc(cli, "-m", "deepseek-v3", "-c", "dgx-h100", "-n", "16", "--pp", "2", "--ep", "8")
    assert doc["peak_stage"] == {"rank": 1, "role": "last"}
    assert doc["params_per_gpu"] == pytest.approx(last, rel=1e-12)
    # the bytes are of the same stage: no ZeRO, BF16 weights = 2 bytes per parameter held
    assert doc["per_gpu_bytes"]["weights"] == pytest.approx(2 * last, rel=1e-12)


def test_busiest_middle_stage_and_first_stage(cli) -> None:  # type: ignore[no-untyped-def]
    """Llama 3 8B (h 4096, 32 heads, 8 KV heads of 128, FFN 14336, vocab 128256 untied): one layer is
    2 h^2 + 2 h 1024 + 2 h + 3 h 14336 = 218,112,000 parameters. pp 4 with first_stage_layers 2 leaves 10 layers on
    each later stage: with 8 micro-batches (global batch 64 over dp 8) the middle stage (rank 1) holds 3 in flight
    against the last stage's 1 and has the peak, 10 layers and no embedding (with one micro-batch the last stage,
    with the output layer and its logits, has it: test_last_stage_*); pp 2 balanced with 4 micro-batches (2 in
    flight on the first stage, 1 on the last): the first stage, 16 layers + the embedding 128256 x 4096."""
    layer = 2 * 4096**2 + 2 * 4096 * 1024 + 2 * 4096 + 3 * 4096 * 14336
    assert layer == 218_112_000
    mid = _doc(cli, "-m", "llama3-8b", "-c", "dgx-h100", "-n", "32", "--pp", "4",
               "--set", "strategy.first_stage_layers=2", "--global-batch", "64")
    assert mid["peak_stage"] == {"rank": 1, "role": "middle"}
    assert mid["params_per_gpu"] == pytest.approx(10 * layer, rel=1e-12)
    first = _doc(cli, "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--pp", "2", "--global-batch", "32")
    assert first["peak_stage"] == {"rank": 0, "role": "first"}
    assert first["params_per_gpu"] == pytest.approx(16 * layer + 128256 * 4096, rel=1e-12)
    only = _doc(cli, "-m", "llama3-8b", "-c", "dgx-h100", "-n", "8")
    assert only["peak_stage"] == {"rank": 0, "role": "only"}


def test_table_names_the_stage(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("memory", "-m", "deepseek-v3", "-c", "dgx-h100", "-n", "16", "--pp", "2", "--ep", "8")
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    # 52.87e9 parameters: the last stage's 30 MoE layers (test_deepseek_v3_mtp_last_stage_is_reported)
    assert "a GPU of the last pipeline stage (rank 1 of pp 2" in text and "52,866,920,448 parameters on" in text


def test_uneven_split_is_accepted_as_predict_accepts_it(cli) -> None:  # type: ignore[no-untyped-def]
    """61 layers over pp 4 (16/15/15/15, predict's balanced split) are priced, not refused; pp 64 (more stages
    than layers) gets predict's verdict, infeasible with predict's reason (it was refused with exit 2 while predict,
    scale and sensitivity answered: hostile-input round 8)."""
    assert _doc(cli, "-m", "deepseek-v3", "-c", "dgx-h100", "-n", "32", "--pp", "4", "--ep", "8")["peak_stage"][
        "role"] in ("first", "last")
    args = ("-m", "deepseek-v3", "-c", "dgx-h100", "-n", "64", "--pp", "64", "--json")
    mem, pred = cli("memory", *args), cli("predict", *args)
    assert mem.code == pred.code == 0, (mem.err, pred.err)
    m, p = json.loads(mem.out), json.loads(pred.out)
    assert m["feasible"] is p["feasible"] is False and "layers do not split" in m["infeasible_reason"]
    assert m["infeasible_reason"] == p["infeasible_reason"]


# Llama 3 8B activations per layer and micro-batch at s 8192, b 1, tp 1, flash attention, no dropout (Korthikanti
# Table 2 generalised, cost/memory.py): 2 norm inputs + QKV and MLP inputs 8 sbh, Q 2 sbh, K and V 4 s g d (g 8,
# d 128), O-projection input 2 sbh, gated MLP 6 s f, flash log-sum-exp 4 a s (fp32)
S, H8, F8, A8, G8, D8, V8 = 8192, 4096, 14336, 32, 8, 128, 128256
LAYER_ACT = 8 * S * H8 + 2 * S * H8 + 4 * S * G8 * D8 + 2 * S * H8 + 6 * S * F8 + 4 * A8 * S
LAYER8 = 218_112_000
# the final norm's and output layer's 16-bit inputs, 2 sbh each, on the stage with the output layer (Korthikanti
# et al. 2022 §4.3: 2sbh/t + 2sbh/t with sequence parallelism; 4 sbh on every tp rank without it)
HEAD_IN8 = 4 * S * H8


def test_last_stage_output_layer_and_logits_set_the_peak(cli) -> None:  # type: ignore[no-untyped-def]
    """Without MTP the last stage was never priced. pp 4 with first_stage_layers 2 and one micro-batch (m 1, every
    stage holds 1 in flight): the middle stages hold 10 layers; the last holds the same 10 layers, the final
    RMSNorm h and the output layer V h (untied) with their gradients and Adam states, the fp32 logits 4 s b V / t
    the cross entropy saves for its backward (Korthikanti et al. 2022 §4; Megatron-Core vocab-parallel cross entropy
    casts .float() and saves exp_logits) and the final norm's and output layer's inputs 4 s b h. ZeRO 0: 2 + 2 + 12
    bytes per parameter; 5 % fragmentation and 1 GB workspace."""
    assert LAYER_ACT == 1_141_899_264
    params = 10 * LAYER8 + H8 + V8 * H8
    act = 10 * LAYER_ACT + 4 * S * V8 + HEAD_IN8
    doc = _doc(cli, "-m", "llama3-8b", "-c", "dgx-h100", "-n", "32", "--pp", "4",
               "--set", "strategy.first_stage_layers=2")
    assert doc["peak_stage"] == {"rank": 3, "role": "last"}
    assert doc["params_per_gpu"] == pytest.approx(params, rel=1e-12)
    assert doc["per_gpu_bytes"]["activations"] == pytest.approx(act, rel=1e-12)
    assert doc["per_gpu_bytes"]["total"] == pytest.approx((16 * params + act) * 1.05 + 1e9, rel=1e-12)


def test_last_stage_decides_the_verdict(cli) -> None:  # type: ignore[no-untyped-def]
    """Micro-batch 3 on the split above: the middle stage needs (16 x 10 layers + 3 x 10 LAYER_ACT) x 1.05 + 1 GB
    = 73.6 GB and fits the H100's 80 GB; the last stage needs (16 (10 layers + final norm h + V h) + 3 (10 LAYER_ACT
    + 4 s V + 4 s h)) x 1.05 + 1 GB = 96.1 GB and does not, so the strategy is out of memory for `memory` and
    `predict` alike."""
    mid = (16 * 10 * LAYER8 + 3 * 10 * LAYER_ACT) * 1.05 + 1e9
    last = (16 * (10 * LAYER8 + H8 + V8 * H8) + 3 * (10 * LAYER_ACT + 4 * S * V8 + HEAD_IN8)) * 1.05 + 1e9
    assert mid < 80e9 < last
    doc = _doc(cli, "-m", "llama3-8b", "-c", "dgx-h100", "-n", "32", "--pp", "4", "--micro-batch", "3",
               "--set", "strategy.first_stage_layers=2")
    assert doc["per_gpu_bytes"]["total"] == pytest.approx(last, rel=1e-12)
    assert not doc["fits"] and not doc["feasible"] and doc["max_micro_batch"] == 2
    r = cli("predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "32", "--pp", "4", "--micro-batch", "3",
            "--set", "strategy.first_stage_layers=2", "--json")
    assert r.code == 0, r.err
    pred = json.loads(r.out)
    assert pred["feasible"] is False and "memory" in pred["infeasible_reason"]


def test_tied_last_stage_holds_its_own_output_weight(cli) -> None:  # type: ignore[no-untyped-def]
    """GPT-3 175B (h 12288, f 49152, 96 layers, vocab 51200, tied, biases, LayerNorm, dropout 0.1), tp 8 pp 8: each
    stage has 12 layers of 12 h^2 + 13 h parameters. Megatron-Core builds the last stage's output layer with its own
    weight even when tied (skip_weight_param_allocation only where the stage also embeds), so it holds 12 layers +
    V h, / 8, except what every TP rank holds whole: per layer the two LayerNorms (gain and bias, 4 h) and the
    row-parallel O-proj's and FC2's biases (2 h), and the final LayerNorm (2 h). Its activations (s 2048, b 1, no
    SP, flash): per layer 10 sbh replicated (two norm inputs, QKV and MLP inputs, two dropout masks) + (Q 2 sbh +
    K, V 4 sbh + O input 2 sbh + MLP 4 s f + lse 4 a s) / 8, and the fp32 logits 4 s V / 8, and the final norm's and
    output layer's inputs 4 s h (no SP: whole on every tp rank). The first stage holds as many parameters (12 layers
    + the V h table, no learned positions; not the final LayerNorm) but one dropout mask s h instead of the logits,
    so the last stage has the peak."""
    h, f, s, v, a, t = 12288, 49152, 2048, 51200, 96, 8
    params = (12 * (12 * h * h + 7 * h) + v * h) / t + 12 * 6 * h + 2 * h
    per_layer = 10 * s * h + (2 * s * h + 4 * s * h + 2 * s * h + 4 * s * f + 4 * a * s) / t
    # GPT-3's shape without its learned position table, which would put the peak on the first stage
    doc = _doc(cli, "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "64", "--tp", "8", "--pp", "8",
               "--set", "model.position_embeddings=0")
    assert doc["peak_stage"] == {"rank": 7, "role": "last"}
    assert doc["params_per_gpu"] == pytest.approx(params, rel=1e-12)
    assert doc["per_gpu_bytes"]["activations"] == pytest.approx(12 * per_layer + 4 * s * v / t + 4 * s * h,
                                                               rel=1e-12)


def test_gpipe_last_stage_keeps_every_micro_batch_logits(cli) -> None:  # type: ignore[no-untyped-def]
    """GPipe runs every forward before any backward, so the last stage keeps all m micro-batches' layer activations
    and fp32 logits (and the head's inputs 4 s h): global batch 32 over dp 8, m 4: 4 (10 LAYER_ACT + 4 s V + 4 s h)
    on the last stage (1F1B: the layers of 1 micro-batch in flight and one micro-batch's logits)."""
    doc = _doc(cli, "-m", "llama3-8b", "-c", "dgx-h100", "-n", "32", "--pp", "4", "--schedule", "gpipe",
               "--global-batch", "32", "--set", "strategy.first_stage_layers=2")
    assert doc["num_microbatches"] == 4 and doc["peak_stage"] == {"rank": 3, "role": "last"}
    assert doc["per_gpu_bytes"]["activations"] == pytest.approx(4 * (10 * LAYER_ACT + 4 * S * V8 + HEAD_IN8),
                                                                          rel=1e-12)


def test_largest_micro_batch_checks_every_stage(cli) -> None:  # type: ignore[no-untyped-def]
    """tp 4 with sequence parallelism, pp 2, first_stage_layers 17 (the last stage 15), ZeRO 0, no global batch
    (m 1). Per GPU and sample everything is / 4: a layer LAYER_ACT / 4, the logits 4 s V / 4, the head's inputs
    4 s h / 4 (sequence parallel); the parameters / 4 but the RMSNorm gains, whole on every TP rank (2 h a layer,
    and the final norm's h on the last stage). At b 1 the first
    stage is the peak (more states), but the last stage gains more per sample (its logits beat the first stage's
    2 extra layers), so the first stage's closed form (b 13) overshoots: the last stage needs 90.2 GB at b 13 and
    84.6 GB at b 12, the largest micro-batch that fits the H100's 81559 MiB = 85.52 GB (hardware/README.md, Memory
    capacity: the device total nvidia-smi reports)."""
    cap = 81559 * 2**20
    first_states = 16 * ((17 * (LAYER8 - 2 * H8) + V8 * H8) / 4 + 17 * 2 * H8)
    last_states = 16 * ((15 * (LAYER8 - 2 * H8) + V8 * H8) / 4 + 15 * 2 * H8 + H8)
    first_act, last_act = 17 * LAYER_ACT / 4, 15 * LAYER_ACT / 4 + 4 * S * V8 / 4 + HEAD_IN8 / 4

    def total(states: float, act: float, b: int) -> float:
        return (states + b * act) * 1.05 + 1e9

    assert total(first_states, first_act, 1) > total(last_states, last_act, 1)
    assert int(((cap - 1e9) / 1.05 - first_states) // first_act) == 13  # the first stage's closed form
    assert total(last_states, last_act, 12) < cap < total(last_states, last_act, 13)
    base = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "64", "--pp", "2", "--tp", "4", "--sequence-parallel",
            "--set", "strategy.first_stage_layers=17"]
    doc = _doc(cli, *base)
    assert doc["peak_stage"] == {"rank": 0, "role": "first"} and doc["max_micro_batch"] == 12
    at12 = _doc(cli, *base, "--micro-batch", "12")
    assert at12["fits"] and at12["peak_stage"]["role"] == "last"
    assert at12["per_gpu_bytes"]["total"] == pytest.approx(total(last_states, last_act, 12), rel=1e-12)


@pytest.mark.parametrize(("model", "cluster", "gpus", "sync"), [
    ("gpt3-175b", "dgx-a100", 1024, "bsp"), ("deepseek-v3", "dgx-h100", 1024, "bsp"),
    ("llama3-70b", "dgx-h100", 256, "hier:4"), ("inception-v3", "dgx-1-v100", 64, "bsp")])
def test_memory_total_is_the_total_of_the_parts(model: str, cluster: str, gpus: int, sync: str) -> None:
    """The planner's feasibility pass prices only the peak stage's total (stage_memory.memory_total: the stages' totals
    compared and selected, no part selected apart); on the planner's whole outer grid at every ZeRO stage (first,
    middle and last stages, uneven splits, MTP) it is the sum of the parts memory_parts reports, to the bit."""
    import numpy as np
    from msgspec.structs import replace

    from scalemodel.engine import planner
    from scalemodel.engine.job import build_job
    from scalemodel.engine.pipeline_ranks import microbatches
    from scalemodel.engine.stage_memory import memory_parts, memory_total
    from scalemodel.specs import TrainingSpec, load_cluster, load_workload

    job = build_job(load_cluster(cluster, []), load_workload(model, []), TrainingSpec(global_batch=gpus))
    cfg = planner.configurations(job, gpus, gpus)
    axes = planner._axes(job, {})
    choices = planner.comm_choices(job, gpus, {})
    comm0 = {f: choices[f][0] for f in planner.COMM_FIELDS}
    grid = planner._outer_grid(gpus, gpus, cfg, 0, len(cfg["dp"]), axes, comm0, {})
    grid = replace(grid, zero=axes["zero"].reshape(1, -1, 1, 1))
    m = microbatches(grid)
    parts = memory_parts(job, grid, m, sync=sync)
    by_hand = sum(np.broadcast_to(parts[k], grid.shape) for k in
                  ("weights", "gradients", "optimizer", "activations", "fragmentation", "workspace"))
    total = np.broadcast_to(memory_total(job, grid, m, sync=sync), grid.shape)
    assert np.array_equal(total, by_hand)
    assert np.any(np.asarray(grid.pp) > 1) or model == "inception-v3"
