"""PyTorch FSDP1's flat-gradient passes (strategy fsdp_flat_param) and flash-attn's unpad / pad copies (strategy
attention_unpad): bytes and seconds against values worked out by hand from the code paths the functions cite
(torch/distributed/fsdp/_runtime_utils.py _post_backward_hook and _reduce_grad; flash_attn/bert_padding.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import script_module, training_cases
from grid_helpers import HBM, grid8, one

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.engine.predict import predict
from scalemodel.errors import InputError  # a spec built in Python refuses as the API does (review25d)
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.workload import TransformerWorkload

# A 4-layer MPT-style model: h = 1024, 8 heads (d = 128, MHA), ungated MLP f = 4096, tied 32,000-token embedding.
TINY = TransformerWorkload(name="tiny-mpt", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                           seq_len=2048, gated_mlp=False, biases=False, tied_embeddings=True, dropout=False)


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


def test_fsdp_flat_grad_bytes_by_hand() -> None:
    # cat 2p + cast (p + r when r != p) + pre-divide 2r
    assert compute.fsdp_flat_grad_bytes(1.0, param_bytes=2, reduce_bytes=4) == pytest.approx(4 + 6 + 8)  # DEFAULT
    assert compute.fsdp_flat_grad_bytes(1.0, param_bytes=2, reduce_bytes=2) == pytest.approx(4 + 0 + 4)  # PURE
    assert compute.fsdp_flat_grad_bytes(1.0, param_bytes=4, reduce_bytes=4) == pytest.approx(8 + 0 + 8)  # fp32
    assert compute.fsdp_flat_grad_bytes(1.0, param_bytes=2, reduce_bytes=4, divide=False) == pytest.approx(10)
    assert compute.fsdp_flat_grad_bytes(201_326_592, param_bytes=2, reduce_bytes=4) == pytest.approx(
        18 * 201_326_592)  # one MPT-7B block's 12 h^2 weights: 3.62 GB a micro-batch


def test_attention_unpad_bytes_by_hand() -> None:
    # MHA, b 6, s 2048, h 4096 (MPT-7B): X = 6 * 2048 * 4096 = 50,331,648 elements of 2 bytes.
    # forward: gathers of q, k, v 3 x (2 + 2) + pad: zeros 2 + index_put 2 + 2 = 18 bytes per element
    # backward: grad_output[indices] 2 + 2, then per dq, dk, dv: zeros 2 + scatter_ 2 + 2 = 4 + 18 = 22
    sh = shape(layers=32, hidden=4096, heads=32, vocab=50368)
    f, b = compute.attention_unpad_bytes(sh, micro_batch=6, seq_len=2048)
    assert f == pytest.approx(18 * 50_331_648) and b == pytest.approx(22 * 50_331_648)
    # GQA (Llama-3 8B: a 32, g 8, d 128), b 1, s 8192, tp 2: Q = O = 8192 * 4096 / 2, K = V = 8192 * 1024 / 2
    gqa = shape(layers=32, hidden=4096, heads=32, kv_heads=8, vocab=128_000)
    q, kv = 8192 * 4096 / 2, 8192 * 1024 / 2
    f, b = compute.attention_unpad_bytes(gqa, micro_batch=1, seq_len=8192, tp=2)
    assert f == pytest.approx(2 * (2 * (q + 2 * kv) + 3 * q))
    assert b == pytest.approx(2 * (3 * (q + 2 * kv) + 2 * q))




@pytest.mark.parametrize(("grad_bytes", "per_param"), [(4, 18.0), (2, 8.0)])
def test_fsdp_flat_grad_time_on_the_stage(h100, grad_bytes, per_param) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=grad_bytes))
    assert job.memory_bandwidth == 3.35e12 and job.memory_efficiency == pytest.approx(0.88)
    p = 4 * (1024 * 3072 + 1024 * 1024 + 2 * 1024 * 4096 + 2 * 1024) + 32_000 * 1024 + 1024  # 83,108,864
    assert job.params == p
    on = grid8(job, zero="fsdp", fsdp_flat_param=True)
    assert one(layer_compute.fsdp_flat_grad_time(job, on)) == pytest.approx(p * per_param / HBM)
    assert one(layer_compute.fsdp_flat_grad_time(job, grid8(job, zero="2", fsdp_flat_param=True))) == pytest.approx(
        p * per_param / HBM)  # SHARD_GRAD_OP runs the same post-backward path
    assert float(np.max(layer_compute.fsdp_flat_grad_time(job, grid8(job, zero="fsdp")))) == 0.0
    # a ZeRO-1 grid (the planner can pair the pinned field with any stage): no FSDP gradient, no passes
    g1 = grid_from_arrays(tp=1, pp=1, dp=8, micro_batch=2, global_batch=16, gpus=8, zero=1, fsdp_flat_param=True)
    assert float(np.max(layer_compute.fsdp_flat_grad_time(job, g1))) == 0.0
    # one micro-batch's backward grows by exactly that; the forward does not move
    layers = np.asarray([4.0])
    a = layer_compute._compute_per_microbatch(job, grid8(job, zero="fsdp"), layers)
    b = layer_compute._compute_per_microbatch(job, on, layers)
    assert one(b["forward"] - a["forward"]) == 0.0
    assert one(b["backward"] - a["backward"]) == pytest.approx(p * per_param / HBM)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_attention_unpad_in_the_layer_times(h100, recompute) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec())
    x = 2 * 2048 * 1024  # b 2, s 2048, h 1024
    fwd, bwd = 18 * x / HBM, 22 * x / HBM
    layers = np.asarray([4.0])
    a = layer_compute._compute_per_microbatch(job, grid8(job, recompute=recompute), layers)
    b = layer_compute._compute_per_microbatch(job, grid8(job, recompute=recompute, attention_unpad=True), layers)
    assert one(b["forward"] - a["forward"]) == pytest.approx(4 * fwd)
    again = fwd if recompute == "full" else 0.0  # full recompute repeats the forward's copies
    assert one(b["backward"] - a["backward"]) == pytest.approx(4 * (bwd + again))
    assert one(b["forward_per_layer"] - a["forward_per_layer"]) == pytest.approx(fwd)


def test_predict_compute_grows_by_the_hand_values(h100) -> None:  # type: ignore[no-untyped-def]
    """8 GPUs, pp 1, 1 micro-batch of 2 sequences per GPU: the compute part of the step grows by the forward and
    backward copies of 4 layers and one pass of 18 bytes over every parameter."""
    tr = TrainingSpec(global_batch=16, micro_batch=2, grad_bytes_per_param=4)
    base = predict(h100, TINY, 8, tr, StrategySpec(dp=8, zero="fsdp"))
    more = predict(h100, TINY, 8, tr, StrategySpec(dp=8, zero="fsdp", fsdp_flat_param=True, attention_unpad=True))
    x = 2 * 2048 * 1024
    want = 4 * (18 + 22) * x / HBM + 83_108_864 * 18 / HBM
    assert more.breakdown_s["compute"] - base.breakdown_s["compute"] == pytest.approx(want, rel=1e-9)
    assert more.strategy["fsdp_flat_param"] is True and more.strategy["attention_unpad"] is True


def test_spec_rejects_the_fields_where_they_cannot_apply() -> None:
    with pytest.raises(InputError, match="fsdp_flat_param"):
        StrategySpec(zero="1", fsdp_flat_param=True)
    with pytest.raises(InputError, match="attention_unpad"):
        StrategySpec(flash_attention=False, attention_unpad=True)
    StrategySpec(zero="2", fsdp_flat_param=True)
    StrategySpec(zero="hsdp", fsdp_flat_param=True, attention_unpad=True)


def test_cli_set_the_fields(cli) -> None:  # type: ignore[no-untyped-def]
    common = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--json"]
    base = json.loads(cli("predict", *common, "--zero", "fsdp").out)
    r = cli("predict", *common, "--zero", "fsdp", "--set", "strategy.fsdp_flat_param=true",
            "--set", "strategy.attention_unpad=true")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["strategy"]["fsdp_flat_param"] is True and out["strategy"]["attention_unpad"] is True
    assert out["breakdown_s"]["compute"] > base["breakdown_s"]["compute"]
    r = cli("predict", *common, "--set", "strategy.fsdp_flat_param=true")  # zero defaults below 2
    assert r.code == 2 and r.err.startswith("error: --set strategy.fsdp_flat_param") and "Traceback" not in r.err
    # plan searches zero: only the stages that run it (ux37, engine.planner.ZERO_SWITCHES); where the constraints
    # leave none of them, refused as predict is
    r = cli("plan", *common, "--top", "2", "--set", "strategy.fsdp_flat_param=true", "--constraint", "tp<=2,pp=1")
    assert r.code == 0, r.err
    assert {p["strategy"]["zero"] for p in json.loads(r.out)["ranked"]} <= {"2", "3", "fsdp", "hsdp"}
    r = cli("plan", *common, "--top", "2", "--set", "strategy.fsdp_flat_param=true", "--constraint",
            "tp<=2,pp=1,zero<=1")
    assert r.code == 2 and r.err.startswith("error: --set strategy.fsdp_flat_param") and "Traceback" not in r.err
    r = cli("plan", *common, "--top", "2", "--set", "strategy.zero=fsdp", "--set", "strategy.fsdp_flat_param=true",
            "--set", "strategy.attention_unpad=true", "--constraint", "tp<=2,pp=1")
    assert r.code == 0, r.err


def test_validation_rule_sets_the_fields_from_the_cases() -> None:
    """llm-foundry rows: FSDP1 everywhere (Composer); unpad/pad only where the case names unpad_input (attn_impl
    flash: 70b, 7b, 3b per scripts/train/benchmarking/sweep.py @5e85bd62d; 13b and 30b ran attn_impl triton)."""
    cases = training_cases()
    vt = script_module("validate_training")
    want = {"mpt_h100_70b_512": True, "mpt_h100_30b_512": False, "mpt_h100_13b_512": False,
            "mpt_h100_7b_512": True, "mpt_h100_3b_512": True, "mpt_a100_40g_70b_128": False}
    for cid, unpad in want.items():
        case = cases[cid]
        zero = vt.parse_zero(case["parallelism"].get("zero_stage"), "mpt")
        assert vt.framework_options(case, zero) == {"fsdp_flat_param": True, **({"attention_unpad": True} if unpad
                                                                                   else {})}, cid
    assert vt.framework_options(cases["mb2511_h100_llama3_8b_fsdp_fp8cs"], "fsdp") == {}
