"""The design goal of the per-row ``framework:`` fields (validation/README.md "Per-row framework settings"): a new row
of a known source lands in validation/training_cases.yaml and scripts/validate_training.py compares it without any edit
of the script. Each test writes a temporary training_cases.yaml holding an existing row and a copy of it with another
id (same source prefix) and one ``framework`` field changed, runs the validator's own loader (``main --json``) and
predictor (``predict_new_case``) on it in-process, and checks that the field reaches the TrainingSpec / StrategySpec
and moves the prediction the way the field means, against numbers worked out here from the row's architecture and
the datasheets, not read back from the model. A misspelled field is refused with the row id, the field and the
allowed names (one ``error:`` line, exit 2)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from conftest import script_module, training_cases

#: Llama 3.1 8B's parameters by hand from the rows' architecture (vocab 128256, hidden 4096, 32 layers, ffn 14336,
#: 32 heads and 8 KV heads of 128, untied embedding and output layer, RMSNorm without bias): embedding and output
#: 2 V h, a layer q and o h^2 each, k and v h x 1024 each, gated MLP 3 h ffn, two norms 2 h; the final norm h.
_V, _H, _L, _FFN, _KV = 128256, 4096, 32, 14336, 8 * 128
LLAMA31_8B_PARAMS = 2 * _V * _H + _L * (2 * _H * _H + 2 * _H * _KV + 3 * _H * _FFN + 2 * _H) + _H
assert LLAMA31_8B_PARAMS == 8_030_261_248  # Meta's model card: 8.03B


def _variant(row_id: str, new_id: str, **framework: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The row and a copy of it under ``new_id`` with ``framework`` fields changed (a new row of its source)."""
    row = training_cases()[row_id]
    new = copy.deepcopy(row)
    new["id"] = new_id
    new["framework"] = {**(row.get("framework") or {}), **framework}
    return row, new


def _run(vt: Any, tmp_path: Any, monkeypatch: Any, capsys: Any, rows: list[dict[str, Any]]) -> tuple[int, str, str]:
    """``validate_training.main --json`` on a training_cases.yaml holding ``rows`` only (the module's cached run of
    the real file left untouched)."""
    path = tmp_path / "training_cases.yaml"
    path.write_text(yaml.safe_dump(rows, sort_keys=False))
    monkeypatch.setattr(vt, "NEW_CASES", path)
    monkeypatch.setattr(vt, "CASES", None)
    monkeypatch.setattr(vt, "validate_all", vt.validate_all.__wrapped__)
    rc = vt.main(["--json"])
    out, err = capsys.readouterr()
    return rc, out, err


def _predicted(vt: Any, monkeypatch: Any, case: dict[str, Any]) -> tuple[Any, Any]:
    """The validator's CaseResult for ``case`` and the engine's Prediction it was made from."""
    seen: list[Any] = []
    engine_predict = vt.predict

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(engine_predict(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(vt, "predict", spy)
    res = vt.predict_new_case(case)
    monkeypatch.setattr(vt, "predict", engine_predict)
    assert isinstance(res, vt.CaseResult), res
    return res, seen[-1]


def test_a_new_dgxc25_row_with_fp32_master_weights_is_compared_and_holds_12_bytes_of_state(
        tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """dgxc25's BF16 Llama 3.1 8B row on 8 H100 keeps 10 bytes of Adam state a parameter (framework.
    optimizer_bytes_per_param: Apex's store_param_remainders); a run of the same source keeping fp32 master weights
    (NeMo's first setup_optimization branch) holds 12. Sharded over data x context parallel ranks (distributed
    optimizer, dp 4 x cp 2 = 8): 12 P / 8 bytes a GPU against 10 P / 8, P by hand; the step is not faster (more state
    for the optimizer step to read and write)."""
    vt = script_module("validate_training")
    row, new = _variant("dgxc25_h100_llama31_8b_bf16_8", "dgxc25_h100_llama31_8b_bf16_8_fp32master",
                        optimizer_bytes_per_param=12)
    same = copy.deepcopy(row)
    same["id"] = "dgxc25_h100_llama31_8b_bf16_8_rerun"  # another id, nothing else changed
    rc, out, err = _run(vt, tmp_path, monkeypatch, capsys, [row, new, same])
    assert rc == 0 and err == ""
    doc = json.loads(out)
    by_id = {r["id"]: r for r in doc["results"]}
    assert set(by_id) == {row["id"], new["id"], same["id"]} and doc["not_expressible"] == []
    assert by_id[new["id"]]["families"]["source"] == "dgxc25"
    # no rule keyed by the id: the copy under another id predicts the same number
    assert by_id[same["id"]]["predicted"] == by_id[row["id"]]["predicted"]

    old_res, old_p = _predicted(vt, monkeypatch, row)
    new_res, new_p = _predicted(vt, monkeypatch, new)
    assert old_res.training.optimizer_bytes_per_param == 10.0 and new_res.training.optimizer_bytes_per_param == 12.0
    assert new_res.predicted == pytest.approx(by_id[new["id"]]["predicted"], rel=1e-12)  # main and the predictor
    shards = 4 * 2  # dp x cp: Megatron's distributed optimizer shards over the data-parallel group with CP
    assert old_p.memory["parts_bytes"]["optimizer"] == pytest.approx(10 * LLAMA31_8B_PARAMS / shards, rel=1e-9)
    assert new_p.memory["parts_bytes"]["optimizer"] == pytest.approx(12 * LLAMA31_8B_PARAMS / shards, rel=1e-9)
    assert new_p.memory["per_gpu_bytes"] > old_p.memory["per_gpu_bytes"]
    assert new_p.step_time_s >= old_p.step_time_s and new_res.speed_error <= old_res.speed_error


def test_a_new_mlpt51_row_without_dp_overlap_exposes_its_gradient_sync(
        tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """framework.dp_overlap false (read in MLPerf v5.1's AMD rows of the same source) on a copy of HPE's 64-GPU H200
    Llama 3.1 8B row: the strategy's overlap is off on Megatron-Core's DDP (which then prices one bucket per buffer
    whatever the bucket_size, dp_comm._bucket_bytes, as Megatron's resolve_ddp_bucket_size); the step is slower and its
    data-parallel time, now exposed, is at least what the eight nodes' NICs need: the distributed optimizer
    reduce-scatters the gradients (>= 2 bytes a parameter, Megatron's buffer is never below bf16) and all-gathers
    the parameters (>= 1 byte, FP8 gather) over dp 32 x cp 2 = 64 ranks on 8 nodes, so each node takes in >= 7/8 of
    P (2 + 1) bytes through 8 NICs of 400 Gb/s (the row's nic_Gbps, per direction)."""
    vt = script_module("validate_training")
    row, new = _variant("mlpt51_h200_llama31_8b_64", "mlpt51_h200_llama31_8b_64_nodpoverlap", dp_overlap=False)
    rc, out, err = _run(vt, tmp_path, monkeypatch, capsys, [row, new])
    assert rc == 0 and err == ""
    assert {r["id"] for r in json.loads(out)["results"]} == {row["id"], new["id"]}

    old_res, old_p = _predicted(vt, monkeypatch, row)
    new_res, new_p = _predicted(vt, monkeypatch, new)
    assert old_res.strategy.overlap is True and new_res.strategy.overlap is False
    assert old_res.strategy.megatron_ddp and new_res.strategy.megatron_ddp
    assert new_res.settings["dp_overlap"] is False
    hw = row["hardware"]
    nodes = row["parallelism"]["gpus"] // hw["gpus_per_node"]
    node_in = hw["nics_per_node"] * hw["nic_Gbps"] * 1e9 / 8  # bytes/s into a node
    floor = (nodes - 1) / nodes * LLAMA31_8B_PARAMS * (2 + 1) / node_in
    assert floor == pytest.approx(0.0527, abs=1e-4)
    assert new_p.breakdown_s["dp_comm"] >= floor
    assert new_p.step_time_s > old_p.step_time_s and new_res.speed_error < old_res.speed_error


def test_a_misspelled_field_on_a_new_row_is_refused_with_id_field_and_allowed_names(
        tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Every allowed name is printed, not the first ten: before docs32 the list went into InputError's ``what``,
    which cuts at 300 characters."""
    vt = script_module("validate_training")
    row, new = _variant("mlpt51_h200_llama31_8b_64", "mlpt51_h200_llama31_8b_64_typo", dp_overlapp=False)
    rc, out, err = _run(vt, tmp_path, monkeypatch, capsys, [row, new])
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: training_cases.yaml: row mlpt51_h200_llama31_8b_64_typo: unknown field "
                          "framework.dp_overlapp; allowed: ")
    allowed = err.split("allowed: ")[1].strip().split(", ")
    assert allowed == sorted(vt.FRAMEWORK_FIELDS) and "dp_overlap" in allowed
