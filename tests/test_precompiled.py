"""The precompiled built-in catalog (scalemodel/data/catalog.json, scalemodel/specs/precompiled.py):
current with the YAML files, the same documents as parsing them, bypassed for any other text, and
errors on built-in files still named with their lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from conftest import ROOT

import scalemodel.specs.yamlread as yamlread
from scalemodel.specs import precompiled
from scalemodel.specs.loader import CATALOG, Unparsed, read_document

CATALOG_FILES = [p for top, sub in CATALOG.values() for p in sorted((ROOT / top / sub).glob("*.yaml"))]


def test_catalog_is_current() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_catalog.py"), "--check"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def _typed(v: object) -> object:
    """A value with the type of every leaf spelled out (so 1 and 1.0 or True and 1 compare unequal)."""
    if isinstance(v, dict):
        return {k: _typed(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_typed(x) for x in v]
    return (type(v).__name__, v)


@pytest.mark.parametrize("path", CATALOG_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_catalog_file_is_read_precompiled_and_equals_its_yaml(path: Path) -> None:
    data, node = read_document(path)
    assert isinstance(node, Unparsed), "the file should be found in the precompiled catalog"
    expected, _ = yamlread.load(path.read_text(encoding="utf-8-sig"), str(path))
    assert _typed(data) == _typed(expected)
    assert list(data) == list(expected)  # key order too (it orders "known keys" and JSON echoes)


def test_each_read_returns_fresh_objects() -> None:
    """A caller that edits what it read (here: empties the tiers, renames a tier) leaves the next read whole: the
    second read equals a fresh parse of the YAML, leaf by leaf (an emptied list alone was checked before)."""
    path = ROOT / "hardware" / "clusters" / "dgx-a100.yaml"
    first, _ = read_document(path)
    first["tiers"][0]["name"] = "edited"
    first["tiers"].clear()
    again, _ = read_document(path)
    expected, _ = yamlread.load(path.read_text(encoding="utf-8-sig"), str(path))
    assert _typed(again) == _typed(expected)


def test_an_edited_copy_is_parsed_from_its_yaml(tmp_path: Path) -> None:
    """Same name, other text (one byte): the stored document must not be used."""
    src = ROOT / "hardware" / "clusters" / "dgx-a100.yaml"
    text = src.read_text()
    assert "gpus_per_node: 8\n" in text
    edited = tmp_path / src.name
    edited.write_text(text.replace("gpus_per_node: 8\n", "gpus_per_node: 4\n", 1))
    data, node = read_document(edited)
    assert data["gpus_per_node"] == 4 and not isinstance(node, Unparsed) and node is not None
    same = tmp_path / "copy" / src.name
    same.parent.mkdir()
    same.write_text(text)
    data, node = read_document(same)  # the same name and text anywhere: the same document
    assert data["gpus_per_node"] == 8 and isinstance(node, Unparsed)


def test_a_damaged_catalog_falls_back_to_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "catalog.json"
    bad.write_text('{"source": "x", "documents": {')
    monkeypatch.setattr(precompiled, "DATA", bad)
    monkeypatch.setattr(precompiled, "_documents", None)
    data, node = read_document(ROOT / "hardware" / "clusters" / "dgx-a100.yaml")
    assert data["gpus_per_node"] == 8 and node is not None and not isinstance(node, Unparsed)


def test_errors_on_a_builtin_file_keep_its_line_numbers(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The line of the field, counted here in the YAML text, as an error on a file outside the catalog. A value
    given with --set is refused as that --set item (hostile-input round 7: the built-in file's line pointed at a
    value that was fine)."""
    path = ROOT / "examples" / "workloads" / "gpt3-175b.yaml"
    r = cli("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "64", "--set", "model.layers=abc", "--json")
    assert r.code == 2
    assert r.err.startswith("error: --set model.layers: Input should be a valid integer"), r.err
    user = tmp_path / "gpt3-175b.yaml"  # a file of the user's that extends the built-in one
    user.write_text("extends: " + str(path) + "\nname: mine\nlayers: abc\n")
    r = cli("predict", "-m", str(user), "-c", "dgx-a100", "-n", "64", "--json")
    assert r.code == 2
    assert r.err.startswith(f"error: {user}:3: layers: Input should be a valid integer"), r.err


@pytest.mark.parametrize(("field", "value"), [("gpus_per_node", "eight"), ("gpus_per_node", -8),
                                              ("bogus_field", 1), (None, None)])
def test_a_damaged_entry_that_fails_validation_names_the_catalog_not_a_yaml_line(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field, value) -> None:  # type: ignore[no-untyped-def]
    """An entry that decodes but is not what its (valid) YAML says, yet carries its own checksum (a wrong build,
    not damage after it: damage misses the checksum and falls back to the YAML, see below): the error is the
    catalog's, not a line of the YAML (line 7 of dgx-h100.yaml, ``gpus_per_node: 8``, is fine)."""
    doc = json.loads(Path(precompiled.DATA).read_bytes())
    key = next(k for k in doc["documents"] if k.startswith("dgx-h100.yaml:"))
    entry = doc["documents"][key][1]
    if field is None:
        entry = {"kind": "cluster", "name": "dgx-h100"}  # required fields gone
    else:
        entry[field] = value
    doc["documents"][key] = _stamped(entry)
    bad = tmp_path / "catalog.json"
    bad.write_text(json.dumps(doc))
    monkeypatch.setattr(precompiled, "DATA", bad)
    monkeypatch.setattr(precompiled, "_documents", None)
    r = cli("predict", "-c", "dgx-h100", "-m", "llama2-7b", "-n", "64", "--json")
    assert r.code == 2 and r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: "), r.err
    assert "dgx-h100.yaml" in lines[0] and "build_catalog.py" in lines[0]
    assert "dgx-h100.yaml:" not in lines[0]  # no YAML line number: the YAML is not what is wrong
    # a genuine error in the same file still gets its YAML line, catalog or not
    line = next(i for i, t in enumerate((ROOT / "hardware" / "clusters" / "dgx-h100.yaml").read_text().splitlines(), 1)
                if t.startswith("gpus_per_node:"))
    monkeypatch.setattr(precompiled, "DATA", tmp_path / "absent.json")
    monkeypatch.setattr(precompiled, "_documents", None)
    r = cli("predict", "-c", "dgx-h100", "-m", "llama2-7b", "-n", "64", "--set", "cluster.gpus_per_node=x")
    assert r.code == 2 and r.err.startswith("error: --set cluster.gpus_per_node: "), r.err  # the --set item's error
    assert "catalog" not in r.err and f"dgx-h100.yaml:{line}" not in r.err


def _stamped(document: dict) -> list:  # type: ignore[type-arg]
    """A catalog entry ``[checksum, document]`` whose checksum matches ``document`` (as scripts/build_catalog.py
    writes it)."""
    return [precompiled.checksum(msgspec.json.encode(document)), document]


@pytest.mark.parametrize("damage", ["value", "field", "checksum", "not a list"])
def test_a_damaged_entry_that_still_validates_is_not_used(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         damage: str) -> None:  # type: ignore[no-untyped-def]
    """A damaged entry whose document is still a valid cluster (gpus_per_node 8 -> 4; a field dropped that has a
    default) or whose checksum is damaged no longer matches its checksum: the YAML is parsed instead, so the
    prediction is the YAML's (as with no catalog), never the damaged value."""
    doc = json.loads(Path(precompiled.DATA).read_bytes())
    key = next(k for k in doc["documents"] if k.startswith("dgx-h100.yaml:"))
    stored, entry = doc["documents"][key]
    assert stored == precompiled.checksum(msgspec.json.encode(entry))  # the build's checksum, recomputed here
    if damage == "value":
        assert entry["gpus_per_node"] == 8
        entry["gpus_per_node"] = 4
    elif damage == "field":
        del entry["description"]
    elif damage == "checksum":
        stored = f"{(int(stored, 16) ^ 1):08x}"
    doc["documents"][key] = entry if damage == "not a list" else [stored, entry]
    bad = tmp_path / "catalog.json"
    bad.write_text(json.dumps(doc))
    path = ROOT / "hardware" / "clusters" / "dgx-h100.yaml"
    for data_file in (bad, tmp_path / "absent.json"):
        monkeypatch.setattr(precompiled, "DATA", data_file)
        monkeypatch.setattr(precompiled, "_documents", None)
        data, node = read_document(path)
        assert not isinstance(node, Unparsed) and data["gpus_per_node"] == 8  # parsed from the YAML
        r = cli("predict", "-c", "dgx-h100", "-m", "llama2-7b", "-n", "64", "--json")
        assert r.code == 0, r.err
        out = json.loads(r.out)
        if data_file == bad:
            damaged = out["step_time_s"]
    assert damaged == out["step_time_s"]


def test_a_genuine_error_on_a_catalog_file_keeps_its_yaml_line_with_the_catalog_in_use(cli) -> None:  # type: ignore[no-untyped-def]
    """A --set value refused on a built-in (catalog) file names the --set item, not the catalog (round 7: nor the
    YAML line of the value it replaced)."""
    r = cli("predict", "-c", "dgx-h100", "-m", "llama2-7b", "-n", "64", "--set", "cluster.gpus_per_node=x")
    assert r.code == 2 and r.err.startswith("error: --set cluster.gpus_per_node: Input should be a valid integer"), \
        r.err
