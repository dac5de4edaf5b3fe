"""PyTorch FSDP2's copies around its collectives (strategy fsdp_per_param): bytes and seconds against values worked
out by hand from the code paths the functions cite (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py
foreach_all_gather_copy_out: split_with_sizes_copy of the gathered buffer; foreach_reduce_scatter_copy_in:
_chunk_cat of the unsharded gradients into a buffer of the reduce dtype)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import script_module, training_cases
from grid_helpers import HBM, grid8, one

from scalemodel.cost import compute
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.engine.predict import predict
from scalemodel.errors import InputError  # a spec built in Python refuses as the API does (review25d)
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.workload import TransformerWorkload

# A 4-layer Llama-style model: h 1024, 8 heads (d 128), 2 kv heads, gated MLP f 4096, untied 32,000-token embedding.
TINY = TransformerWorkload(name="tiny-llama", layers=4, hidden=1024, heads=8, kv_heads=2, ffn_hidden=4096,
                           vocab=32_000, seq_len=2048, gated_mlp=True, biases=False, tied_embeddings=False,
                           dropout=False)
# per layer: wq 1024^2, wk and wv 1024 x 256 each, wo 1024^2, w1 and w3 1024 x 4096 each, w2 4096 x 1024 (linear)
LINEAR = 2 * 1024 * 1024 + 2 * 1024 * 256 + 3 * 1024 * 4096  # 15,204,352
NORMS = 2 * 1024
PARAMS = 4 * (LINEAR + NORMS) + 2 * 32_000 * 1024 + 1024  # 126,362,624: layers, embedding, output, final norm


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")




def test_bytes_by_hand() -> None:
    # copy-out: read + write of what was gathered; copy-in: read the bf16 gradient, write it as fp32
    out, into = compute.fsdp2_copy_bytes(1000.0, 10.0, grad_bytes=2, reduce_bytes=4)
    assert (out, into) == (2000.0, 60.0)
    # a bf16 reduce still copies (the per-rank interleave into the reduce-scatter input)
    assert compute.fsdp2_copy_bytes(0.0, 10.0, grad_bytes=2, reduce_bytes=2)[1] == 40.0
    out, into = compute.fsdp2_copy_bytes(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    assert list(out) == [2.0, 4.0] and list(into) == [18.0, 24.0]


@pytest.mark.parametrize("reshard", [True, False])
def test_time_on_the_stage(h100, reshard: bool) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    assert job.params == PARAMS
    on = grid8(job, zero="fsdp", fsdp_per_param=True, fsdp_reshard_after_forward=reshard)
    layers = np.asarray([4.0])
    f, b = layer_compute.fsdp2_copy_time(job, on, layers)
    gathered = 2 * PARAMS  # 16-bit gathers
    assert one(f) == pytest.approx(2 * gathered / HBM)
    # the last of 4 block units stays gathered for the backward, and so does the root unit (embedding, output and
    # final norm: 2 x 32,000 x 1024 + 1024, layer_compute.fsdp_root_params)
    regathered = 3 / 4 if reshard else 0.0
    blocks = 2 * 4 * (LINEAR + NORMS)  # the blocks' 16-bit gathers
    assert one(b) == pytest.approx((regathered * 2 * blocks + 6 * PARAMS) / HBM)
    assert float(np.max(layer_compute.fsdp2_copy_time(job, grid8(job, zero="fsdp"), layers)[1])) == 0.0
    # a ZeRO-3 grid (the planner can pair the pinned field with any stage): not FSDP2, no copies
    g3 = grid_from_arrays(tp=1, pp=1, dp=8, micro_batch=2, global_batch=16, gpus=8, zero=3, fsdp_per_param=True)
    assert float(np.max(layer_compute.fsdp2_copy_time(job, g3, layers)[1])) == 0.0
    # one micro-batch grows by exactly that, forward and backward
    a = layer_compute._compute_per_microbatch(job, grid8(job, zero="fsdp", fsdp_reshard_after_forward=reshard), layers)
    c = layer_compute._compute_per_microbatch(job, on, layers)
    assert one(c["forward"] - a["forward"]) == pytest.approx(one(f))
    assert one(c["backward"] - a["backward"]) == pytest.approx(one(b))


def test_float8_gathered_weights_copy_at_one_byte(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(precision="fp8", grad_bytes_per_param=4))
    on = grid8(job, zero="fsdp", fsdp_per_param=True, fsdp_fp8_all_gather=True)
    f, _ = layer_compute.fsdp2_copy_time(job, on, np.asarray([4.0]))
    gathered = 2 * PARAMS - 4 * LINEAR  # the linear weights at 1 byte, norms and embeddings at 2
    assert one(f) == pytest.approx(2 * gathered / HBM)


def test_predict_compute_grows_by_the_hand_values(h100) -> None:  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=16, micro_batch=2, grad_bytes_per_param=4)
    base = predict(h100, TINY, 8, tr, StrategySpec(dp=8, zero="fsdp"))
    more = predict(h100, TINY, 8, tr, StrategySpec(dp=8, zero="fsdp", fsdp_per_param=True))
    # one micro-batch per GPU: every gather copied out in the forward, 3 of the 4 blocks again in the backward (not the
    # last block, not the root unit), the gradients copied in
    want = (2 * 2 * PARAMS + 3 / 4 * 2 * 2 * 4 * (LINEAR + NORMS) + 6 * PARAMS) / HBM
    assert more.breakdown_s["compute"] - base.breakdown_s["compute"] == pytest.approx(want, rel=1e-9)
    assert more.strategy["fsdp_per_param"] is True


def test_spec_rejects_it_where_it_cannot_apply() -> None:
    with pytest.raises(InputError, match="fsdp_per_param"):
        StrategySpec(zero="3", fsdp_per_param=True)
    with pytest.raises(InputError, match="fsdp_per_param"):
        StrategySpec(zero="fsdp", fsdp_per_param=True, fsdp_flat_param=True)
    StrategySpec(zero="hsdp", fsdp_per_param=True)


def test_cli_sets_it(cli) -> None:  # type: ignore[no-untyped-def]
    common = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--json"]
    base = json.loads(cli("predict", *common, "--zero", "fsdp").out)
    r = cli("predict", *common, "--zero", "fsdp", "--set", "strategy.fsdp_per_param=true")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["strategy"]["fsdp_per_param"] is True
    assert out["breakdown_s"]["compute"] > base["breakdown_s"]["compute"]
    r = cli("predict", *common, "--set", "strategy.fsdp_per_param=true")  # zero defaults to 0
    assert r.code == 2 and r.err.startswith("error: --set strategy.fsdp_per_param") and "Traceback" not in r.err
    r = cli("plan", *common, "--top", "2", "--set", "strategy.zero=fsdp", "--set", "strategy.fsdp_per_param=true",
            "--constraint", "tp<=2,pp=1")
    assert r.code == 0, r.err


def test_validation_rule_sets_it_for_torchtitan() -> None:
    cases = training_cases()
    vt = script_module("validate_training")
    for cid in ("titan25_h200_llama31_8b_fsdp32_fp8", "titan25_h200_llama31_8b_fsdp64_fp8"):
        assert vt.framework_options(cases[cid], "fsdp") == {"fsdp_per_param": True}
    assert vt.framework_options(cases["mb2511_h100_llama3_8b_fsdp_fp8cs"], "fsdp") == {}  # Megatron-FSDP
