"""review41: second routes folded into one (closing40's "debatable" list), each checked against what the model
prices, not against the shared definition itself.

(1) strategy eager_activation: the job's warning "is not priced" is said exactly where the layer's priced compute
does not move with the field (compute.eager_activation_priced decides both); worked per shape in test_noflags40.
"""

from __future__ import annotations

import numpy as np
import pytest

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
