"""Workload squared_relu (Nemotron-4's relu(x)^2 MLP activation, run as two eager ATen ops in Megatron-LM and NeMo):
the spec rule, the HuggingFace mapping (hidden_act relu2), the validation rule, and one layer's forward and backward
memory-bound seconds against bytes worked out by hand (docs/model.md#layer-eltwise)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from conftest import script_module, training_cases

from scalemodel.cost.compute import layer_compute_time
from scalemodel.cost.transformer import shape
from scalemodel.specs import load_workload
from scalemodel.specs.workload import TransformerWorkload

HBM = 7.7e12 * 0.85  # B200: 7.7 TB/s datasheet x 0.85 (hardware/accelerators/b200.yaml)


def test_gated_mlp_with_squared_relu_is_refused() -> None:
    with pytest.raises((ValueError, msgspec.ValidationError), match="squared_relu"):
        TransformerWorkload(name="x", layers=2, hidden=64, heads=4, vocab=100, seq_len=128, gated_mlp=True,
                            squared_relu=True)._check()


def test_hf_relu2_reads_as_squared_relu(tmp_path: Path) -> None:
    cfg = {"model_type": "nemotron", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
           "vocab_size": 100, "intermediate_size": 256, "hidden_act": "relu2"}
    d = tmp_path / "nemo"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    assert load_workload(d).squared_relu is True
    (d / "config.json").write_text(json.dumps({**cfg, "hidden_act": "gelu"}))
    assert load_workload(d).squared_relu is False


def test_validation_rows_stating_squared_relu() -> None:
    mod = script_module("validate_training")
    by_id = training_cases()
    for cid in ("nemo2502_b200_nemotron4_15b", "nemo2502_b200_nemotron4_340b", "nemotron4_15b_h100_768"):
        wl, _ = mod.case_workload(by_id[cid])
        assert wl is not None and wl.squared_relu, cid
        assert wl.biases is False, cid  # NeMo's NemotronConfig add_bias_linear False (NO_BIAS_TYPES)
    wl, _ = mod.case_workload(by_id["mb2511_b200_llama3_8b_fp8cs"])
    assert wl is not None and not wl.squared_relu


def test_nemotron4_15b_layer_memory_time_by_hand() -> None:
    """b 2, s 4096 (T = 8192 tokens), f 24576, t 1, e 2: the activation moves 2e f more forward (relu and pow
    against one GeLU pass) and 7e f more backward (pow_backward 7e + threshold_backward 3e against gelu_backward 3e)."""
    kw = dict(layers=32, hidden=6144, heads=48, kv_heads=8, vocab=256000, ffn_hidden=24576, biases=False,
              dropout=False)
    run = dict(micro_batch=2, seq_len=4096, peak_flops=4.5e15, memory_bandwidth=7.7e12, memory_efficiency=0.85,
               flash_attention=True)
    sq = layer_compute_time(shape(**kw, squared_relu=True), **run)
    ge = layer_compute_time(shape(**kw), **run)
    T, f = 8192.0, 24576.0
    assert float(sq.forward_memory - ge.forward_memory) == pytest.approx(T * 2 * 2 * f / HBM)
    assert float(sq.forward - ge.forward) == pytest.approx(T * 2 * 2 * f / HBM)
    assert float(sq.backward - ge.backward) == pytest.approx(T * 7 * 2 * f / HBM)
    assert float(sq.forward_gemm) == float(ge.forward_gemm)  # no GEMM moves
