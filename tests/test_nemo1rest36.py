"""Which sources run a per-micro-batch loss all-reduce over the data-parallel group (strategy loss_dp_allreduce,
docs/model.md#loss-dp-allreduce), nemo1rest36's part: the framework revision of each remaining source, read in its
own Dockerfile / pinned commit, against the code that does or does not all-reduce (validation/README.md#nemo1rest36).

The table below is written from the code read, not from validate_training.py: each source with the revision its runs
used and whether that revision's loss function all-reduces over the DP group once a micro-batch.
"""

from __future__ import annotations

from conftest import script_module, training_cases

#: source -> (revision read, all-reduces each micro-batch's loss over DP) for the sources nemo1rest36 checked.
CHECKED: dict[str, tuple[str, bool]] = {
    # NeMo 2 MaskedTokenLossReduction.forward all-reduces before 58f6689700 (v2.2.0 megatron_parallel.py L1750)
    "mlpt50": ("NeMo v2.2.0, Dockerfile NEMO_REVISION of eos-dfw_n*_ngc25.01_nemo", True),
    # Primus v0.7.0 pre_trainer.py L196: all_reduce(reporting_loss, group=mpu.get_data_parallel_group())
    "tprimat26": ("Primus v0.7.0 9c529cd4 (MI300X); nemo:25.04 = NeMo v2.3.0 (H100 twins)", True),
    # Megatron-Bridge losses.py masked_next_token_loss: no all_reduce at any tag v0.1.0a0 .. v0.6.0
    "mb2511": ("Megatron-Bridge v0.2.0", False),
    "mb2604": ("Megatron-Bridge v0.4.0", False),
    "mb2606": ("Megatron-Bridge v0.5.0", False),
    "mb2608": ("Megatron-Bridge v0.6.0", False),
    # Megatron-LM after 3806ec2754: once a step
    "mcrec26": ("Megatron-LM 2026", False),
    # mixed per row: off at source level, the NeMo v2.2.0 rows set it per row
    "mlpt51": ("NeMo v2.2.0 (Nebius 405B) / v2.4.0 / eddf23fcba / v2.5.0rc0 / 25.09-alpha.rc1", False),
    "mlpt60": ("Megatron-Bridge / NeMo eddf23fcba (Cisco H100)", False),
    # DeepSpeed PipelineEngine: loss_fn each micro-batch, _aggregate_total_loss all-reduces once per train_batch
    "bloom": ("Megatron-DeepSpeed on DeepSpeed PipelineEngine", False),
    "mtnlg": ("Megatron-DeepSpeed on DeepSpeed PipelineEngine", False),
    "gaudi25": ("HabanaAI Megatron-DeepSpeed on PipelineEngine", False),
    # nanotron c2528430 trainer.py L550: one async all-reduce after the step's micro-batches
    "nanotron25": ("nanotron c2528430", False),
    # torchtitan: the loss is reduced in the logging branch / after the micro-batch loop, once a step at most
    "titan24": ("torchtitan", False),
    "titan2404": ("torchtitan 395a52627", False),
    "titan25": ("torchtitan", False),
    "tao25": ("torchtitan via torchao", False),
    # MaxText / XLA: the loss reduction is a psum inside the jitted step, scheduled by XLA, no host-visible sync
    "maxtext": ("MaxText", False),
    "maxtext23": ("MaxText", False),
    "mtdgxc24": ("MaxText on GPU", False),
    "mtgpu24": ("MaxText on GPU", False),
    "mttier25": ("MaxText", False),
    "mtv5e23": ("MaxText", False),
}

#: Rows whose own revision differs from their source's: mlpt51's Nebius llama31_405b runs build NeMo v2.2.0
#: (Nebius/benchmarks/llama31_405b/implementations/nebius_h200_n{64,128}/Dockerfile at training_results_v5.1@441d65f4).
ROW_ON = {"mlpt51_h200_llama31_405b_512", "mlpt51_h200_llama31_405b_1024"}


def test_checked_sources_match_the_table() -> None:
    """Each checked source's setting in validation/sources.yaml is the table's."""
    vt = script_module("validate_training")
    for src, (_, on) in CHECKED.items():
        assert (src in vt.LOSS_DP_ALLREDUCE) is on, src


def test_row_overrides_are_exactly_the_nebius_rows() -> None:
    """Only the two NeMo 2.2 Nebius rows state the field, and they reach the strategy; their source's other rows
    (later NeMo) and an mlpt60 row stay off; an mlpt50 row (source on) and a tprimat26 MI300X row are on."""
    vt = script_module("validate_training")
    assert set(vt.rows_with("loss_dp_allreduce")) == ROW_ON
    cases = training_cases()
    expect = {**{r: True for r in ROW_ON}, "mlpt51_h100_llama31_8b_64": False, "mlpt51_h200_llama31_8b_64": False,
              "mlpt60_h200_llama31_8b_16": False, "mlpt50_h100_llama31_405b_512": True,
              "tprimat26_mi300x_llama31_8b_pp2": True}
    for rid, on in expect.items():
        res = vt.predict_new_case(cases[rid])
        assert res.strategy.loss_dp_allreduce is on, rid


def test_row_field_is_checked() -> None:
    """The row field takes true or false only (a row may also turn its source's rule off)."""
    vt = script_module("validate_training")
    assert vt.refused_value(True, *vt.FRAMEWORK_FIELDS["loss_dp_allreduce"]) is None
    assert vt.refused_value(False, *vt.FRAMEWORK_FIELDS["loss_dp_allreduce"]) is None
    assert vt.refused_value("yes", *vt.FRAMEWORK_FIELDS["loss_dp_allreduce"]) is not None
