"""review30a: the MaxText v6e rows maxtext30 compared, read against MaxText at the rows' commits.

MaxText's loss at AI-Hypercomputer/maxtext@92e59fdf5 (the Llama 3.1 70B row's config; tpu-recipes-v0.1.2 and
5e6a7caff alike): the output head ``logits_dense`` writes the logits [batch, length, vocab] in cfg.dtype, sharded
(activation_embed_and_logits_batch, activation_length_no_exp, activation_vocab): the batch over data / fsdp /
fsdp_transpose, the vocabulary over tensor (src/MaxText/configs/base.yml logical_axis_rules), and casts them to
fp32 (base.yml ``cast_logits_to_fp32: True``, layers/decoders.py ``apply_output_head``); no vocab tiling
(``num_vocab_tiling`` is not in 92e59fdf5's base.yml; 1, untiled, at 5e6a7caff). train.py ``loss_fn`` runs
max_utils.cross_entropy_with_logits on the whole tensor, a custom_vjp whose residuals are the fp32 logits,
exp_shifted and log_softmax (each as large). So the model's held fp32 logits, 4 s b V / t a chip, are what
MaxText's program names at the least, not a buffer it lacks: the rows' memory is not changed.

Checked here by hand against the validator's prediction of the rows: the held logits are 4 s b V / t with b the
sequences a TP group runs (MaxText's per_device_batch_size x ici_tensor_parallelism) and t the tensor axis.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from conftest import ROOT, load_yaml, script_module

VOCAB = 128_256  # Llama 3.1's vocabulary (meta-llama config.json vocab_size)


def _captured(case_id: str) -> tuple[Any, tuple[Any, ...]]:
    """The validator's prediction of one row and the (cluster, workload, gpus, training, strategy) it priced."""
    mod = script_module("validate_training")
    seen: dict[str, tuple[Any, ...]] = {}
    real = mod.predict

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen["args"] = args
        return real(*args, **kwargs)

    mod.predict = spy
    try:
        case = next(c for c in load_yaml(ROOT / "validation" / "training_cases.yaml") if c["id"] == case_id)
        assert mod.predict_new_case(case) is not None
    finally:
        mod.predict = real
    return real, seen["args"]


@pytest.mark.parametrize(("case_id", "seqs", "seq", "tensor"), [
    ("mttier25_v6e_llama31_70b_256", 5, 8192, 1),    # per_device_batch_size 5, ici_fsdp -1: 5 sequences a chip
    ("mttier25_v6e_llama31_405b_256", 4, 8192, 4),   # per_device_batch_size 1 x ici_tensor 4: 4 a TP group
])
def test_held_logits_are_maxtexts_fp32_tensor(case_id: str, seqs: int, seq: int, tensor: int) -> None:
    """A loss that keeps 2-byte logits instead of fp32 (loss_impl te) frees exactly 2 s b V / t of the row's
    activations: the model holds MaxText's fp32 [b, s, V / t] logits (21.0 GB a chip for the 70B row, whose memory
    reads 32.7 GB, within the 33.55 GB capacity since ici30)."""
    predict, (cluster, wl, gpus, tr, st) = _captured(case_id)
    fp32 = predict(cluster, wl, gpus, tr, st).memory["parts_bytes"]["activations"]
    bf16 = predict(cluster, wl, gpus, tr, msgspec.structs.replace(st, loss_impl="te")).memory["parts_bytes"][
        "activations"]
    assert fp32 - bf16 == pytest.approx(2.0 * seqs * seq * VOCAB / tensor, rel=1e-9)


def test_405b_row_as_its_config_runs() -> None:
    """llama3_1_405b_8192_fsdp_dcn (maxtext@5e6a7caff benchmarks/maxtext_trillium_model_configs.py L723):
    ici_fsdp 64 x ici_tensor 4 = 256 chips a slice, dcn_fsdp 2 -> 512 chips, per_device_batch_size 1 -> 512
    sequences a step; MaxText's tokens/s/device is per_device_batch_size x max_target_length / step, = global batch x
    seq / (step x chips), the validator's metric."""
    _, (cluster, _, gpus, tr, st) = _captured("mttier25_v6e_llama31_405b_256")
    assert (gpus, st.tp, tr.global_batch, tr.seq_len) == (512, 4, 512, 8192)
    assert cluster.name == "tpu-v6e-multislice"
    assert cluster.tiers[0].span == 256  # one v6e-256 slice on the ICI
