"""amfsdp35: NeMo Automodel's rows are priced as PyTorch FSDP2 (strategy fsdp_per_param, the validation's
``torch_fsdp2`` source setting; validation/sources.yaml citation torch_fsdp2_automodel26), and under
fsdp_defer_grad_sync FSDP2's forward copy-out happens once a step (docs/model.md#fsdp-deferred-sync).

Checked independently: which rows the validator flags (the three automodel26 ids written out, not derived from the
rule); the Llama 3.1 70B row's compute and memory growth against P and R counted by hand from its widths; the
deferred forward copy-out of a small model against its parameters counted by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import script_module, training_cases
from grid_helpers import HBM, one
from msgspec.structs import replace
from test_fsdp2_copies import LINEAR, NORMS, PARAMS, TINY

from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster

AUTOMODEL = {"automodel26_h100_llama31_70b_fsdp32_cp2", "automodel26_h100_nemotron3_nano",
             "automodel26_h100_dsv3_fsdp64_ep64_256"}

# Llama 3.1 70B by hand: per layer q and o 8192^2, k and v 8192 x 1024, gate / up / down 8192 x 28672, two norms;
# an untied 128,256-token embedding and output layer, a final norm.
LAYER_70B = 2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192  # 855,654,400
ROOT_70B = 2 * 128_256 * 8192 + 8192  # 2,101,354,496: the root unit (embedding, output layer, final norm)
P_70B = 80 * LAYER_70B + ROOT_70B  # 70,553,706,496


def test_validator_flags_exactly_the_automodel_rows_beside_torchtitan() -> None:
    vt = script_module("validate_training")
    cases = training_cases()
    flagged = set()
    for cid, case in cases.items():
        src = vt.families(case)["source"]
        if src in vt.TORCHTITAN:
            continue  # torchtitan's own rule (tests/test_fsdp2_copies.py)
        for zero in ("fsdp", "hsdp"):
            if vt.framework_options(case, zero).get("fsdp_per_param"):
                flagged.add(cid)
    assert flagged == AUTOMODEL
    # and only with a sharded zero: FSDP2's copies need fully_shard
    for cid in AUTOMODEL:
        assert "fsdp_per_param" not in vt.framework_options(cases[cid], "1")


@pytest.fixture(scope="module")
def automodel_predictions() -> dict[str, tuple[Any, ...]]:
    """id -> the validator's (cluster, workload, gpus, training, strategy) of each automodel26 row."""
    vt = script_module("validate_training")
    cases = training_cases()
    seen: dict[str, tuple[Any, ...]] = {}
    orig = vt.predict
    try:
        for cid in sorted(AUTOMODEL):
            def keep(*a: Any, _cid: str = cid, **k: Any) -> Any:
                seen[_cid] = a
                return orig(*a, **k)
            vt.predict = keep
            vt.predict_new_case(cases[cid])
    finally:
        vt.predict = orig
    return seen


def test_the_rows_are_predicted_with_it(automodel_predictions) -> None:  # type: ignore[no-untyped-def]
    assert set(automodel_predictions) == AUTOMODEL  # every row priced: a row left unpriced passed the loop before
    for cid, args in automodel_predictions.items():
        st = args[4]
        assert st.fsdp_per_param is True, cid
        assert st.fsdp_defer_grad_sync is (cid == "automodel26_h100_nemotron3_nano"), cid


def test_llama70b_row_by_hand(automodel_predictions) -> None:  # type: ignore[no-untyped-def]
    """The 70B row (pp 1, FSDP over dp 32 x cp 2 = 64 ranks, m = 4, bf16 reduce, the last layer kept gathered, the
    root too). Per micro-batch FSDP2 copies: the forward's copy-out 2 x (2 P); the backward's copy-out of 79 of the
    80 layers re-gathered, 2 x 2 (P - R) x 79/80; the gradient copy-in (2 + 2) P. Memory: the root's bf16 copy held
    from the forward to the backward, 2 R (the shard's 0 + 4 bytes at K = 12 equal its 2 + 2)."""
    args = automodel_predictions["automodel26_h100_llama31_70b_fsdp32_cp2"]
    vt = script_module("validate_training")
    on = vt.predict(*args)
    off = vt.predict(*args[:4], replace(args[4], fsdp_per_param=False))
    assert args[3].global_batch == 128 and args[4].dp == 32 and args[4].cp == 2
    per_mb = 2 * 2 * P_70B + 2 * 2 * (P_70B - ROOT_70B) * 79 / 80 + (2 + 2) * P_70B
    want = 4 * per_mb / HBM  # about 1.13 s of the 18.9 s step
    assert on.breakdown_s["compute"] - off.breakdown_s["compute"] == pytest.approx(want, rel=1e-6)
    a, b = on.memory["parts_bytes"], off.memory["parts_bytes"]
    states = (a["weights"] + a["gradients"]) - (b["weights"] + b["gradients"])
    assert states == pytest.approx(2 * ROOT_70B, rel=1e-9)
    assert a["optimizer"] == b["optimizer"]
    # the row's own optimizer bytes (framework.optimizer_bytes_per_param 8: TE FusedAdam's fp32 moments, no master)
    # over the 64 FSDP ranks (dp 32 x cp 2), the shard's gradient at the bf16 parameters' dtype
    assert a["optimizer"] == pytest.approx(8 * P_70B / 64, rel=1e-9)
    assert a["gradients"] == pytest.approx(2 * P_70B / 64, rel=1e-9)


def test_deferred_sync_copies_out_once_a_step() -> None:
    """tests/test_fsdp2_copies.py's 4-layer model (its parameters counted there by hand), dp 8, m = 4 micro-batches of
    1: with fsdp_defer_grad_sync only the first forward gathers, so the forward's copy-out is 2 x 2 P / 4 a
    micro-batch; the backward's re-gathers (3 of 4 blocks with reshard after forward) and copy-in are unchanged."""
    cluster = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=32, micro_batch=1, grad_bytes_per_param=4)
    job = build_job(cluster, TINY, tr)
    layers = np.asarray([4.0])

    def copies(**kw: Any) -> tuple[float, float]:
        g = grid_from_strategy(StrategySpec(dp=8, zero="fsdp", fsdp_per_param=True, **kw), tr, 8, job)
        f, b = layer_compute.fsdp2_copy_time(job, g, layers)
        return one(f), one(b)

    f_each, b_each = copies()
    f_defer, b_defer = copies(fsdp_defer_grad_sync=True)
    assert f_each == pytest.approx(2 * 2 * PARAMS / HBM)
    assert f_defer == pytest.approx(2 * 2 * PARAMS / HBM / 4)
    blocks = 4 * (LINEAR + NORMS)
    assert b_defer == pytest.approx(b_each) == pytest.approx((3 / 4 * 2 * 2 * blocks + (2 + 4) * PARAMS) / HBM)
    # one micro-batch a step: that forward is the first, copied out in full
    tr1 = TrainingSpec(global_batch=8, micro_batch=1, grad_bytes_per_param=4)
    g1 = grid_from_strategy(StrategySpec(dp=8, zero="fsdp", fsdp_per_param=True, fsdp_defer_grad_sync=True), tr1, 8,
                            build_job(cluster, TINY, tr1))
    assert one(layer_compute.fsdp2_copy_time(job, g1, layers)[0]) == pytest.approx(f_each)
