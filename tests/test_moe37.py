"""moe37: the DeepSeek-V3 GB200 optimisation ablation against the model, term by term
(docs/model.md#moe37-gb200-ablation).

Checked independently, from the published figures: NVIDIA/Megatron-LM
docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md @1d9edcf8c7 (the 13-step TFLOPS table,
§2.2.1's DeepEP bandwidths) and the launch of its final run, deepseek-v3-gb200-reproduce-guide.md @32ea0afdbf §4 (the
flags below, the ones the Megatron-LM reader reads; the data, logging and learning-rate flags left out). TFLOPS are
turned into tokens/s with Megatron's own per-token count as Megatron-Bridge printed it for the same model (25.11 GB200
DeepSeek-V3 row: 782 TFLOP/s at 3139 tokens/s/GPU), not with the model's.
"""

from __future__ import annotations

import json
from math import comb

from scalemodel.cost import ep_dispatch
from scalemodel.cost.placement import place
from scalemodel.engine.host_floor import SOURCE_LOCAL_EXPERTS, moe_layer_host_floor
from scalemodel.engine.network import build_network
from scalemodel.specs import load_cluster

# the reproduce guide's launch (§4 "Launch script"), the flags that set the parallel layout, model, precision,
# recompute, graphs and dispatcher
FINAL_LAUNCH = """python pretrain_gpt.py \\
--tensor-model-parallel-size 1 --pipeline-model-parallel-size 8 --expert-model-parallel-size 32 \\
--context-parallel-size 1 --expert-tensor-parallel-size 1 --use-distributed-optimizer --overlap-grad-reduce \\
--overlap-param-gather --use-mcore-models --disable-bias-linear --micro-batch-size 1 --global-batch-size 2048 \\
--cross-entropy-loss-fusion --cross-entropy-fusion-impl te --transformer-impl transformer_engine --seq-length 4096 \\
--num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 --num-attention-heads 128 --kv-channels 128 \\
--max-position-embeddings 4096 --position-embedding-type rope --normalization RMSNorm --swiglu \\
--untie-embeddings-and-output-weights --multi-latent-attention --qk-layernorm --num-experts 256 \\
--moe-ffn-hidden-size 2048 --moe-shared-expert-intermediate-size 2048 --moe-router-topk 8 --moe-grouped-gemm \\
--moe-router-dtype fp32 --moe-permute-fusion --bf16 \\
--recompute-granularity selective --recompute-modules moe_act mlp \\
--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess \\
--pipeline-model-parallel-layout "Et|(tt|)*30L" --moe-router-force-load-balancing \\
--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32 \\
--fp8-recipe mxfp8 --fp8-format e4m3 --fp8-param-gather --use-precision-aware-optimizer \\
--main-grads-dtype fp32 --main-params-dtype fp32 --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16
"""

MEASURED_FINAL_TFLOPS = 970.01  # the table's last row (HybridEP, CPU-side optimisation, cuDNN norm fusion)
MEASURED_DEEPEP_TFLOPS, MEASURED_HYBRIDEP_TFLOPS = 829.93, 943.56  # the rows before and after "HybridEP"
MEGATRON_GFLOP_PER_TOKEN = 782e3 / 3139  # Megatron-Bridge 25.11 GB200 DeepSeek-V3 (no MTP): 249.1
DEEPEP_MNNVL_GBPS = (400.0, 190.0)  # §2.2.1: EP 32 dispatch / combine algorithm bandwidth, 24 SMs


def _final(cli, tmp_path, backend: str = "hybridep") -> dict:  # type: ignore[no-untyped-def]
    launch = tmp_path / "dsv3_gb200.sh"
    launch.write_text(FINAL_LAUNCH.replace("backend hybridep", f"backend {backend}"))
    # the validator's host floor for an attention-graphed dropless row (scripts/validate_training.py host_floor_s)
    h = float(moe_layer_host_floor(512 * 4096 / 8 / 9299 / (64 * 48), SOURCE_LOCAL_EXPERTS, False))
    r = cli("predict", "-c", "gb200-nvl72", "-m", "deepseek-v3", "-n", "256", "--strategy", str(launch),
            "--set", "model.mtp_layers=0", "--set", f"strategy.moe_layer_host_s={h}", "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_flop_convention_by_hand(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The model counts every key of the attention core, Megatron the causal half: the model's FLOPs a token less
    3 x 61 layers x 2 x 2048 (half of s) x 128 heads x (192 + 128) is Megatron's published count within 1 %."""
    p = _final(cli, tmp_path)
    model_gflop = p["flops"]["tflops_per_gpu"] * 1e3 / p["throughput"]["tokens_per_s_per_gpu"]
    causal_half = 3 * 61 * 2 * 2048 * 128 * (192 + 128) / 1e9  # 30.7 GFLOP a token
    assert abs(causal_half - 30.70) < 0.01
    assert abs((model_gflop - causal_half) / MEGATRON_GFLOP_PER_TOKEN - 1) <= 0.01, model_gflop


def test_final_step_agrees_with_the_published_run(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """970.01 TFLOPS at 249.1 GFLOP a token is 3894 tokens/s/GPU; the model on the same launch within 4 %, its device
    terms carrying the step (no host floor binds: the host part under 1 % of the step)."""
    p = _final(cli, tmp_path)
    measured = MEASURED_FINAL_TFLOPS * 1e3 / MEGATRON_GFLOP_PER_TOKEN
    assert abs(measured - 3894) < 1
    got = p["throughput"]["tokens_per_s_per_gpu"]
    assert abs(got / measured - 1) <= 0.04, got
    bd = p["breakdown_s"]
    assert bd.get("host", 0.0) < 0.01 * p["step_time_s"]
    assert bd["compute"] > 0.7 * p["step_time_s"] and 0.1 * p["step_time_s"] < bd["ep_comm"] < 0.25 * p["step_time_s"]


def test_deepep_over_mnnvl_is_priced_as_hybridep(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The one component the ablation shows slower than priced (docs/model.md#moe37-gb200-ablation, not priced: no
    row runs DeepEP over more than 8 NVLink ranks). The model's exchange at EP 32 on NVL72, by hand: 4096 tokens of
    7168 BF16 values, top-8 of 256 experts, 8 a rank, so a token reaches 32 (1 - C(248, 8) / C(256, 8)) = 7.27 ranks
    and a rank receives 4096 x 7.27 rows; over the priced time that is 1.6x and 3.4x the published DeepEP dispatch
    and combine bandwidths, and the model's DeepEP step is 2-3 % slower than its HybridEP one (the experts' FP8
    padding copies, moefp837; the exchange is priced alike), where the table measures HybridEP 1.137x faster."""
    tokens, hidden = 4096, 7168
    hit = 32 * (1 - comb(248, 8) / comb(256, 8))
    assert abs(hit - 7.27) < 0.01
    received = tokens * hit * hidden * 2
    pl = place(32, 1, build_network(load_cluster("gb200-nvl72")))
    t = float(ep_dispatch.hierarchical_alltoall_time(tokens * hidden * 2.0, 256, 8, pl))
    algbw = received / t / 1e9
    assert algbw > 1.5 * DEEPEP_MNNVL_GBPS[0] and algbw > 3.3 * DEEPEP_MNNVL_GBPS[1], algbw
    deepep = _final(cli, tmp_path, "deepep")["throughput"]["tokens_per_s_per_gpu"]
    hybridep = _final(cli, tmp_path)["throughput"]["tokens_per_s_per_gpu"]
    # moefp837: DeepEP pads its routing map only under --moe-router-padding-for-quantization, which the launch does not
    # set, so the DeepEP step carries the experts' FP8 padding copies (docs/model.md#fp8-expert-padding): 2-3 % slower
    assert -0.035 <= deepep / hybridep - 1 <= -0.015, deepep / hybridep
    assert MEASURED_HYBRIDEP_TFLOPS / MEASURED_DEEPEP_TFLOPS > 1.13


# Megatron-Core's moe_perf CI baselines (NVIDIA/Megatron-LM tests/functional_tests/test_cases/common/moe_perf
# baseline.json @32f2c9cfdd): forward + backward ms of one MoELayer on 8 H100, EP 8, 4096 tokens a rank
MOE_PERF_MS = {
    ("mixtral", "alltoall", "bf16"): 4.261713600158691 + 7.825059199333191,
    ("mixtral", "hybridep", "bf16"): 4.41397442817688 + 7.8396320104598995,
    ("deepseek", "alltoall", "bf16"): 6.942623972892761 + 10.452603197097778,
    ("deepseek", "hybridep", "bf16"): 5.245569634437561 + 8.845854425430298,
    ("deepseek", "alltoall", "fp8"): 7.413806390762329 + 10.08771367073059,
    ("deepseek", "hybridep", "fp8"): 5.0010079622268675 + 7.715760040283203,
}
# test_cases.py: the proxies' shapes; the TransformerConfig sets no gated_linear_unit and no shared expert
PROXY = {"mixtral": (4096, 14336, 8, 2), "deepseek": (7168, 2048, 32, 8)}


def _one_layer(tmp_path, name: str, hidden: int, ffn: int, experts: int, top_k: int) -> str:  # type: ignore[no-untyped-def]
    moe = "" if experts == 0 else (f"moe:\n  experts: {experts}\n  top_k: {top_k}\n  ffn_hidden: {ffn}\n"
                                   "  shared_experts: 0\n  every: 1\n")
    f = tmp_path / f"{name}.yaml"
    f.write_text(f"kind: transformer\nname: {name}\nlayers: 1\nhidden: {hidden}\nheads: 8\nkv_heads: 8\n"
                 f"ffn_hidden: {ffn if experts else 16}\nvocab: 128\nseq_len: 4096\ngated_mlp: false\n"
                 f"tied_embeddings: false\ndropout: false\n{moe}")
    return str(f)


def _moe_block_ms(cli, tmp_path, proxy: str, dispatcher: str, precision: str,  # type: ignore[no-untyped-def]
                  part: str = "block") -> float:
    """The MoE block as the model prices it: a one-layer model with it (EP 8) less the same layer with a 16-wide dense
    MLP (the attention, norms, embedding and logits cancel); compute and contention differences plus ep_comm."""
    hidden, ffn, experts, top_k = PROXY[proxy]
    prec = ["--precision", "fp8", "--set", "training.fp8_recipe=blockwise"] if precision == "fp8" else []
    flex = [] if dispatcher == "alltoall" else ["--set", "strategy.moe_flex_dispatcher=true",
                                                "--set", f"strategy.moe_flex_backend={dispatcher}"]
    # moe_perf sets no moe_router_padding_for_quantization: alltoall and DeepEP leave the padding to TEGroupedMLP,
    # HybridEP pads in its dispatch (docs/model.md#fp8-expert-padding, moefp837)
    pad = ["--set", "strategy.moe_fp8_padding=true"] if precision == "fp8" and dispatcher != "hybridep" else []
    base = ["predict", "-c", "dgx-h100", "-n", "8", "--global-batch", "8", *prec, "--json"]
    r = cli(*base, "-m", _one_layer(tmp_path, f"{proxy}-moe", hidden, ffn, experts, top_k), "--ep", "8", *flex, *pad)
    assert r.code == 0, r.err
    moe = json.loads(r.out)["breakdown_s"]
    r = cli(*base, "-m", _one_layer(tmp_path, f"{proxy}-dense", hidden, ffn, 0, 0))
    assert r.code == 0, r.err
    dense = json.loads(r.out)["breakdown_s"]
    if part == "ep_comm":
        return 1e3 * moe.get("ep_comm", 0.0)
    return 1e3 * (moe["compute"] - dense["compute"] + moe.get("contention", 0.0) - dense.get("contention", 0.0)
                  + moe.get("ep_comm", 0.0))


def test_moe_perf_exchange_by_hand(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The DeepSeek proxy's alltoall dispatcher moves 4096 x 8 rows of 7168 BF16 values a rank, 470 MB, four times a
    layer; 7/8 of it leaves the GPU. Over NVLink4 (450 GB/s a direction) that is at least 3.65 ms a layer, and the
    measured alltoall - HybridEP gap (3.3 ms, HybridEP sending each token once per GPU, not once per expert) bounds
    what the model's exchange may add over HybridEP's."""
    rows_bytes = 4096 * 8 * 7168 * 2
    assert abs(rows_bytes / 1e6 - 469.8) < 0.1
    floor_ms = 4 * rows_bytes * 7 / 8 / 450e9 * 1e3
    a2a = _moe_block_ms(cli, tmp_path, "deepseek", "alltoall", "bf16")
    hyb = _moe_block_ms(cli, tmp_path, "deepseek", "hybridep", "bf16")
    measured_gap = MOE_PERF_MS[("deepseek", "alltoall", "bf16")] - MOE_PERF_MS[("deepseek", "hybridep", "bf16")]
    assert a2a - hyb > 0.5 * measured_gap and a2a - hyb < 1.5 * measured_gap
    assert _moe_block_ms(cli, tmp_path, "deepseek", "alltoall", "bf16", "ep_comm") > floor_ms
    assert abs(floor_ms - 3.65) < 0.01


def test_moe_perf_blocks_within_the_documented_bands(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """docs/model.md#moe37-moe-perf: BF16 DeepSeek proxy within 8 %, the Mixtral proxy 10-20 % short, and FP8
    blockwise short on both, the FP8 gain over BF16 priced larger than measured (the state this round leaves; a
    change of the pricing that moves these must move the section too)."""
    for proxy, lo, hi in (("deepseek", -0.08, 0.08), ("mixtral", -0.20, -0.10)):
        for disp in ("alltoall", "hybridep"):
            got = _moe_block_ms(cli, tmp_path, proxy, disp, "bf16") / MOE_PERF_MS[(proxy, disp, "bf16")] - 1
            assert lo <= got <= hi, (proxy, disp, got)
    for disp in ("alltoall", "hybridep"):
        bf16 = _moe_block_ms(cli, tmp_path, "deepseek", disp, "bf16")
        fp8 = _moe_block_ms(cli, tmp_path, "deepseek", disp, "fp8")
        assert -0.15 <= fp8 / MOE_PERF_MS[("deepseek", disp, "fp8")] - 1 <= 0.0
        measured_gain = MOE_PERF_MS[("deepseek", disp, "bf16")] / MOE_PERF_MS[("deepseek", disp, "fp8")]
        assert bf16 / fp8 > measured_gain
