"""FP8 weight casts under Megatron's fp8_param_gather (issue 13): the parameters are FP8 already, so Transformer Engine
casts no weight in the forward; the distributed optimizer quantizes its fp32 master shard into them once per step
(Megatron-Core distrib_optimizer.py ``_copy_main_params_to_model_params`` -> fp8_utils.py ``quantize_param_shard``
-> TE ``cast_master_weights_to_fp8``, NVIDIA/Megatron-LM@d98e8a64dd), and on Hopper TE makes the transposed FP8 copy
from the gathered weight (``post_all_gather_processing``). TE's ``quantize_master_weights``
(transformer_engine/pytorch/tensor/utils.py, NVIDIA/TransformerEngine@d0067d0) per element of the shard:

    master.to(bf16)            read 4, write 2
    tensorwise only            tex.compute_amax: read 2 (a separate pass before the DP amax all-reduce)
    update_quantized           read 2, write 1 (delayed: amax fused in this cast)

delayed 9 bytes, tensorwise 11, replacing the 16-bit weight copy the optimizer step otherwise makes (read the fp32
master 4, write 2: dp_comm.WEIGHT_COPY_BYTES = 6). Every value below is counted by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.cost import compute, transformer
from scalemodel.engine import dp_comm, layer_compute
from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster
from tests.test_distopt import TINY, _grid

#: TINY's linear weights per layer (tests/test_megatron_ddp.py): QKV 1024 x 3072 + O 1024 x 1024 + 3 x 1024 x 4096
W = 16_777_216


def _toy(**kw: Any) -> Any:  # tests/test_fp8_casts.py's toy layer: 768 linear weight elements
    base: dict[str, Any] = dict(layers=2, hidden=8, heads=2, vocab=64, kv_heads=2, ffn_hidden=32, gated_mlp=False)
    base.update(kw)
    return transformer.shape(**base)


def test_quantize_bytes_per_master_element_by_hand() -> None:
    assert compute.fp8_param_quantize_bytes("delayed") == 4 + 2 + 2 + 1 == 9
    assert compute.fp8_param_quantize_bytes("tensorwise") == 4 + 2 + 2 + 2 + 1 == 11
    assert compute.fp8_param_quantize_bytes("mxfp8") == 0.0  # gathered in BF16, cast after the gather


def test_layer_weight_casts_become_the_transpose_only() -> None:
    """The toy layer's 768 weight elements: without fp8 params delayed on Hopper 768 x 4 = 3072 (test_fp8_casts);
    with them only the transposed copy, read 1 write 1: 1536 on Hopper, 0 on Blackwell; the activations' casts
    (forward 2816, backward 4608) do not change; mxfp8 keeps its cast, 768 x (2 + 2 x (1 + 1/32)) = 3120."""
    kw = dict(micro_batch=1, seq_len=16, recipe="delayed")
    f, b, w = compute.fp8_quantize_bytes(_toy(), transpose_copy=True, fp8_params=True, **kw)
    assert (float(f), float(b), float(w)) == pytest.approx((2816.0, 4608.0, 1536.0))
    assert float(compute.fp8_quantize_bytes(_toy(), transpose_copy=False, fp8_params=True, **kw)[2]) == 0.0
    mx = dict(micro_batch=1, seq_len=16, recipe="mxfp8", transpose_copy=False)
    assert float(compute.fp8_quantize_bytes(_toy(), fp8_params=True, **mx)[2]) == pytest.approx(3120.0)


@pytest.mark.parametrize(("recipe", "cast", "quantize"), [("tensorwise", 2 + 2 + 1 + 1, 11), ("delayed", 2 + 1 + 1, 9)])
def test_step_prices_the_shard_quantization_not_the_weight_casts(recipe: str, cast: int, quantize: int) -> None:
    """TINY on one DGX H100 node, dp 8, ZeRO 1, one micro-batch a step (m = 1):
    forward casts per layer lose W (cast - 2) bytes (the weight cast, less the transposed copy that stays);
    the optimizer step adds the shard: 4 layers x W / 8 = 8,388,608 elements x (quantize - 6) bytes."""
    h100 = load_cluster("dgx-h100")
    job = build_job(h100, TINY, TrainingSpec(precision="fp8", fp8_recipe=recipe))
    bw = job.memory_bandwidth * job.memory_efficiency
    on, off = _grid(job, zero="1", fp8_param_gather=True), _grid(job, zero="1")
    f_on, b_on = layer_compute.fp8_cast_per_layer(job, on, 0.0)
    f_off, b_off = layer_compute.fp8_cast_per_layer(job, off, 0.0)
    assert float((f_off - f_on).ravel()[0]) == pytest.approx(W * (cast - 2) / bw, rel=1e-12)
    assert float((b_off - b_on).ravel()[0]) == 0.0
    shard = 4 * W / 8
    assert shard == 8_388_608
    extra = dp_comm._optimizer_time(job, on) - dp_comm._optimizer_time(job, off)
    assert float(np.ravel(extra)[0]) == pytest.approx(shard * (quantize - 6) / bw, rel=1e-12)


def test_mxfp8_and_megatron_fsdp_are_left_as_they_were() -> None:
    """mxfp8 parameters are not FP8 parameters on this path (gathered in BF16, quantized after the gather), and zero
    fsdp (Megatron-FSDP) is not priced here: no change to the casts or the optimizer step."""
    b200 = load_cluster("dgx-b200")
    job = build_job(b200, TINY, TrainingSpec(precision="fp8", fp8_recipe="mxfp8"))
    on, off = _grid(job, zero="1", fp8_param_gather=True), _grid(job, zero="1")
    assert np.array_equal(layer_compute.fp8_cast_per_layer(job, on, 0.0)[0],
                          layer_compute.fp8_cast_per_layer(job, off, 0.0)[0])
    assert np.array_equal(dp_comm._optimizer_time(job, on), dp_comm._optimizer_time(job, off))
    h100 = load_cluster("dgx-h100")
    job = build_job(h100, TINY, TrainingSpec(precision="fp8"))
    on, off = _grid(job, zero="fsdp", fp8_param_gather=True), _grid(job, zero="fsdp")
    assert np.array_equal(layer_compute.fp8_cast_per_layer(job, on, 0.0)[0],
                          layer_compute.fp8_cast_per_layer(job, off, 0.0)[0])
    assert np.array_equal(dp_comm._optimizer_time(job, on), dp_comm._optimizer_time(job, off))
