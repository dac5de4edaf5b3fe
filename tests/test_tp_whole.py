"""transformer.tp_whole_elements: the weights every TP rank holds whole (docs/model.md#tp-whole-params), by hand for
small shapes, and the same split flags as the parameter-tensor lists the counts are built from."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import transformer as tr


def _whole(tensors: list[tr.ParamTensor]) -> float:
    return float(np.ravel(sum((np.where(t.split, 0.0, t.n * t.elements) for t in tensors), np.zeros(1)))[0])


def test_gpt_style_position_table_and_layernorm_by_hand() -> None:
    """LayerNorm with biases, learned positions P = 2048, h = 64, dense MHA layer (biases): per layer 2 norms x 2h and
    the row-parallel biases of O and FC2 (h each) = 6h; outside: the position table P h and the final norm 2h."""
    h, P = 64, 2048
    sh = tr.shape(layers=2, hidden=h, heads=4, vocab=100, ffn_hidden=256, gated_mlp=False, biases=True,
                  position_embeddings=P)
    w = tr.tp_whole_elements(sh)
    assert float(w.per_layer) == pytest.approx(6 * h)
    assert float(w.position) == P * h and float(w.final_norm) == 2 * h
    assert float(w.mtp_module) == pytest.approx(6 * h + 3 * 2 * h)  # a module's layer + enorm, hnorm, final norm


def test_mtp_module_rmsnorm_by_hand() -> None:
    """RMSNorm, no biases, no position table, one MTP module: a layer's 2 norm gains + 3 module norms = 5h whole."""
    h = 64
    sh = tr.shape(layers=2, hidden=h, heads=4, vocab=100, ffn_hidden=256, biases=False, mtp_layers=1)
    w = tr.tp_whole_elements(sh)
    assert float(w.position) == 0.0 and float(w.final_norm) == h
    assert float(w.mtp_module) == pytest.approx(5 * h)
    per_layer, outside = tr.tp_replicated_elements(sh)
    assert float(per_layer) == pytest.approx(2 * h) and float(outside) == pytest.approx(h + 5 * h)


@pytest.mark.parametrize("kw", [
    dict(biases=True, position_embeddings=512),
    dict(biases=False, mtp_layers=2),
    dict(biases=False, mtp_layers=1, moe_experts=8, moe_top_k=2, moe_ffn_hidden=32, moe_shared_experts=1,
         moe_latent=16),
])
def test_outside_the_layers_reads_the_non_layer_tensors(kw: dict) -> None:  # type: ignore[type-arg]
    """What tp_replicated_elements counts outside the layers is the split-false part of non_layer_param_tensors,
    and one MTP module's tensors add up to mtp_module_params less its routed experts."""
    sh = tr.shape(layers=2, hidden=64, heads=4, vocab=100, ffn_hidden=256, **kw)
    assert float(np.ravel(tr.tp_replicated_elements(sh)[1])[0]) == pytest.approx(_whole(tr.non_layer_param_tensors(sh)))
    if float(sh.mtp_layers) > 0:
        module = sum(float(np.ravel(t.n * t.elements)[0]) for t in tr.non_layer_param_tensors(sh)[5:])
        routed = float(np.where(sh.last_layer_moe, sh.moe_experts * tr.expert_params(sh), 0.0))
        assert module / float(sh.mtp_weight_modules) + routed == pytest.approx(float(tr.mtp_module_params(sh)))
