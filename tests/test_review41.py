"""review41: second routes folded into one (closing40's "debatable" list), each checked against what the model
prices, not against the shared definition itself.

(1) strategy eager_activation: the job's warning "is not priced" is said exactly where the layer's priced compute
does not move with the field (compute.eager_activation_priced decides both); worked per shape in test_noflags40.

(4) Job.bf16_layer_job: one BF16 twin a job, rebuilt for every replaced copy.
"""

from __future__ import annotations

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.engine import layer_compute
from scalemodel.specs import TransformerWorkload, notices
from tests.test_sp32 import v
from tests.test_tp33 import LAYERS, _setup


def _wl(**kw) -> TransformerWorkload:  # type: ignore[no-untyped-def]
    base = dict(name="m", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000, seq_len=2048,
                tied_embeddings=False)
    return TransformerWorkload(**{**base, **kw})


@pytest.mark.parametrize("kw", [
    dict(gated_mlp=True, biases=False), dict(gated_mlp=True, biases=True), dict(gated_mlp=False, biases=True),
    dict(gated_mlp=False, biases=False), dict(gated_mlp=False, biases=False, squared_relu=True),
    dict(gated_mlp=False, biases=True, squared_relu=True),
])
def test_eager_activation_warning_is_said_where_nothing_moves(kw) -> None:  # type: ignore[no-untyped-def]
    wl = _wl(**kw)
    job, g0, _ = _setup(wl=wl)
    with notices.collecting() as said:
        _, g1, _ = _setup(wl=wl, eager_activation=True)
    layers = np.ones(1) * LAYERS
    c0 = layer_compute._compute_per_microbatch(job, g0, layers, logits_on_stage=False)
    c1 = layer_compute._compute_per_microbatch(job, g1, layers, logits_on_stage=False)
    moved = v(c1["forward"]) != v(c0["forward"]) or v(c1["backward"]) != v(c0["backward"])
    unpriced = any("eager_activation is not priced" in w for w in said)
    assert moved != unpriced, (kw, said)


def test_bf16_layer_job_is_built_once_and_never_carried_into_a_copy() -> None:
    """(4) Job.bf16_layer_job, the BF16 twin both layer_compute's BF16-layer mix and fp8_wgrad false price with: the
    same object each time it is asked for (so the layer memo prices it once), on the BF16 peak and curve with no
    recipe; a replaced copy of the job (msgspec.structs.replace) builds its own from its own fields, never the
    cached twin of the job it was copied from."""
    job, _, _ = _setup(precision="fp8", recipe="delayed")
    twin = job.bf16_layer_job
    assert job.bf16_layer_job is twin
    assert (twin.peak_flops, twin.gemm_max, twin.gemm_half_dim) == (
        job.attention_peak_flops, job.attention_gemm_max, job.attention_gemm_half_dim)
    assert job.peak_flops > twin.peak_flops > 0  # the H100's FP8 peak is twice its BF16 one
    assert (twin.fp8_recipe, twin.fp8_recipe_gemm_factor, twin.fp8_attention, twin.bf16_layer_share) == (
        "", 1.0, False, 0.0)
    copy = replace(job, attention_peak_flops=job.attention_peak_flops / 2)
    assert copy.bf16_layer_job is not twin and copy.bf16_layer_job.peak_flops == job.attention_peak_flops / 2
