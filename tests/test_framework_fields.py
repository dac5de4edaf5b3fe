"""training_cases.yaml rows carry their per-row framework settings as named ``framework:`` fields
(validation/README.md "Per-row framework settings"); the validator refuses a key or field it does not read, with the
row id, the field and the allowed names, never ignoring it (HELPERS: one ``error:`` line, exit 2)."""

from __future__ import annotations

import pytest
from conftest import script_module

from scalemodel.errors import InputError


def _row(**extra: object) -> dict:
    return {"id": "x_h100_row", "kind": "llm_training", **extra}


def test_unknown_framework_field_is_refused_with_id_field_and_allowed_names() -> None:
    vt = script_module("validate_training")
    with pytest.raises(InputError) as e:
        vt.check_row(_row(framework={"dp_overlapp": False}))
    msg = str(e.value)
    assert "row x_h100_row" in msg and "framework.dp_overlapp" in msg
    assert "allowed: " in msg and "dp_overlap" in msg.split("allowed: ")[1]


def test_unknown_row_key_and_bad_values_are_refused() -> None:
    vt = script_module("validate_training")
    with pytest.raises(InputError, match=r"row x_h100_row: unknown key 'frameworks'; allowed: .*framework"):
        vt.check_row(_row(frameworks={}))
    with pytest.raises(InputError, match=r"framework.dp_overlap = True; allowed: False"):
        vt.check_row(_row(framework={"dp_overlap": True}))
    with pytest.raises(InputError, match=r"framework.dp_overlap = 'no'"):
        vt.check_row(_row(framework={"dp_overlap": "no"}))
    with pytest.raises(InputError, match=r"framework.bucket_elements = -1; allowed: a positive int"):
        vt.check_row(_row(framework={"bucket_elements": -1}))
    with pytest.raises(InputError, match=r"framework.bucket_elements = True"):
        vt.check_row(_row(framework={"bucket_elements": True}))
    with pytest.raises(InputError, match=r"framework.nvfp4_disable = \['rht', 'sr'\]; allowed: a list of rht, "):
        vt.check_row(_row(framework={"nvfp4_disable": ["rht", "sr"]}))
    with pytest.raises(InputError, match=r"framework.stage_layers = \[10, 0\]; allowed: a list of positive integers"):
        vt.check_row(_row(framework={"stage_layers": [10, 0]}))
    with pytest.raises(InputError, match=r"framework.layer_impl = 'compiled'; allowed: megatron_te, "):
        vt.check_row(_row(framework={"layer_impl": "compiled"}))
    with pytest.raises(InputError, match=r"row x_h100_row: held_out must be the reason"):
        vt.check_row(_row(held_out=True))
    with pytest.raises(InputError, match=r"framework must be a mapping"):
        vt.check_row(_row(framework=["dp_overlap"]))
    vt.check_row(_row(framework={"dp_overlap": False}, derived_step_time_s=1.0))  # allowed: no error


def test_every_row_of_the_file_passes() -> None:
    vt = script_module("validate_training")
    rows = vt.read_yaml(vt.NEW_CASES)
    for row in rows:
        vt.check_row(row)
    assert any("framework" in r for r in rows)


def test_main_prints_one_error_line_and_exits_2(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    vt = script_module("validate_training")
    bad = tmp_path / "training_cases.yaml"
    bad.write_text("- id: x_h100_row\n  kind: llm_training\n  framework:\n    no_such_setting: 1\n")
    monkeypatch.setattr(vt, "NEW_CASES", bad)
    monkeypatch.setattr(vt, "CASES", None)
    monkeypatch.setattr(vt, "validate_all", vt.validate_all.__wrapped__)  # the module's cached run left untouched
    assert vt.main(["--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("error: training_cases.yaml: row x_h100_row: unknown field framework.no_such_setting; "
                          "allowed:")
