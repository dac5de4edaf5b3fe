"""struct33: the validator reads its files through the CLI's one YAML reader, and keeps no per-source knowledge.

(a) scripts/validate_training.py parsed training_cases.yaml a second time (libyaml's composer) only to refuse a key
given twice (``check_unique_keys``), a twin of scalemodel.specs.yamlread's refusal. It now reads every validation
file through yamlread (its node bound raised for these files), so a repeated key is refused once, in the CLI's words:
``FILE:LINE: duplicate key 'K' (first on line L, again on line LINE); each key once per mapping``.

(b) the settings the script chose by source id (module-level sets and dicts such as MEGATRON_CORE, LOSS_IMPL, and an
``id.startswith("mb")`` test) are validation/sources.yaml's: one entry per source, each setting ``{value, cite}``,
checked setting by setting; the script's code names no source.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, load_yaml, script_module

from scalemodel.errors import InputError
from scalemodel.specs import yamlread

CASES = ROOT / "validation" / "training_cases.yaml"


def _copy_with_repeated_key(tmp_path: Path) -> tuple[Path, int, int]:
    """A copy of training_cases.yaml whose first row with a ``framework:`` mapping repeats its first field on the
    next line: (the copy, the 1-based line of the first, of the repeat), counted on the text here."""
    lines = CASES.read_text(encoding="utf-8").split("\n")
    at = next(i for i, line in enumerate(lines) if line == "  framework:")
    field = lines[at + 1]
    assert field.startswith("    ") and ":" in field, field
    lines.insert(at + 2, field)
    path = tmp_path / "training_cases.yaml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path, at + 2, at + 3


def _key(path: Path, line: int) -> str:
    return path.read_text(encoding="utf-8").split("\n")[line - 1].strip().split(":")[0]


def test_a_repeated_key_in_a_copy_of_the_file_is_refused_with_file_and_lines(tmp_path: Path) -> None:
    vt = script_module("validate_training")
    path, first, again = _copy_with_repeated_key(tmp_path)
    key = _key(path, again)
    with pytest.raises(InputError) as exc:
        vt.read_yaml(path)
    assert str(exc.value) == (f"{path}:{again}: duplicate key {key!r} (first on line {first}, again on line {again}); "
                              "each key once per mapping")


def test_the_refusal_is_the_clis_own_text(tmp_path: Path) -> None:
    """The same words as the reader the CLI reads a spec with (one refusal, not a twin)."""
    vt = script_module("validate_training")
    path, _, _ = _copy_with_repeated_key(tmp_path)
    with pytest.raises(InputError) as cli:
        yamlread.load(path.read_text(encoding="utf-8"), str(path), max_nodes=vt.VALIDATION_MAX_NODES)
    with pytest.raises(InputError) as validator:
        vt.read_yaml(path)
    assert str(validator.value) == str(cli.value)


def test_main_prints_one_error_line_and_exits_2(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    vt = script_module("validate_training")
    path, first, again = _copy_with_repeated_key(tmp_path)
    for name, value in (("NEW_CASES", path), ("CASES", None), ("validate_all", vt.validate_all.__wrapped__)):
        monkeypatch.setattr(vt, name, value)
    code = vt.main(["--json"])
    out, err = capsys.readouterr()
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert err.startswith(f"error: {path}:{again}: duplicate key {_key(path, again)!r} (first on line {first}, ")


def test_a_repeated_key_in_a_nested_mapping_of_a_small_file(tmp_path: Path) -> None:
    vt = script_module("validate_training")
    path = tmp_path / "training_cases.yaml"
    path.write_text("- id: x_h100_row\n  kind: llm_training\n  framework:\n    etp: 2\n    etp: 4\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"training_cases.yaml:5: duplicate key 'etp' \(first on line 4, again on "
                                         r"line 5\); each key once per mapping$"):
        vt.read_yaml(path)


def test_a_file_of_the_repository_is_named_by_its_path_in_it(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    vt = script_module("validate_training")
    monkeypatch.setattr(vt, "ROOT", tmp_path)
    (tmp_path / "validation").mkdir()
    path = tmp_path / "validation" / "sources.yaml"
    path.write_text("a: 1\nb: 2\na: 3\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"^validation/sources.yaml:3: duplicate key 'a' \(first on line 1,"):
        vt.read_yaml(path)


def test_the_node_bound_is_raised_for_the_validation_files_only_as_far_as_they_need() -> None:
    """training_cases.yaml is above the spec bound (so the reader's bound had to be raised for it) and under the
    raised one; counted here on PyYAML's own node tree."""
    import yaml

    vt = script_module("validate_training")

    def count(node: yaml.Node) -> int:
        if isinstance(node, yaml.MappingNode):
            return 1 + sum(count(k) + count(v) for k, v in node.value)
        if isinstance(node, yaml.SequenceNode):
            return 1 + sum(count(v) for v in node.value)
        return 1

    nodes = count(yaml.compose(CASES.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader))  # noqa: S506
    assert yamlread.MAX_NODES < nodes < vt.VALIDATION_MAX_NODES / 2
    assert CASES.stat().st_size < vt.VALIDATION_MAX_BYTES / 2


def test_an_alias_bomb_is_still_refused(tmp_path: Path) -> None:
    vt = script_module("validate_training")
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 8))
    path = tmp_path / "bomb.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=rf"YAML expands to more than {vt.VALIDATION_MAX_NODES} nodes"):
        vt.read_yaml(path)


@pytest.mark.parametrize("name", ["training_cases.yaml", "convergence.yaml"])
def test_the_strict_reader_gives_what_safe_load_gave(name: str) -> None:
    """The validator's figures stay the same: the YAML 1.2 reader gives every validation file the same values, of the
    same types, in the same key order as ``yaml.safe_load`` (YAML 1.1) did."""
    vt = script_module("validate_training")

    def typed(x: object) -> object:
        if isinstance(x, dict):
            return [(k, typed(v)) for k, v in x.items()]
        if isinstance(x, list):
            return [typed(v) for v in x]
        return (type(x).__name__, x)

    path = ROOT / "validation" / name
    assert typed(vt.read_yaml(path)) == typed(load_yaml(path))


# (b) the source-keyed rules' data: validation/sources.yaml

SOURCES = ROOT / "validation" / "sources.yaml"


def _sources_text(**entries: str) -> str:
    """A small sources file: one citation, and the given source entries (flow-style settings)."""
    return "sources:\n" + "".join(f"  {src}: {body}\n" for src, body in entries.items()) \
        + "citations:\n  c1: the citation's text\n"


@pytest.mark.parametrize(("entry", "message"), [
    ("{mgatron_core: {value: true, cite: c1}}",
     r"^sources.yaml: source mb9999: unknown setting 'mgatron_core'; allowed: bucket_128mi, bucket_elements, "),
    ("{run_year: {value: '2025', cite: c1}}",
     r"^sources.yaml: source mb9999: run_year = '2025'; allowed: a positive int$"),
    ("{run_year: {value: 0, cite: c1}}", r"^sources.yaml: source mb9999: run_year = 0; allowed: a positive int$"),
    ("{megatron_core: {value: false, cite: c1}}",
     r"^sources.yaml: source mb9999: megatron_core = False; allowed: True$"),
    ("{loss_impl: {value: fused, cite: c1}}",
     r"^sources.yaml: source mb9999: loss_impl = 'fused'; allowed: megatron, "),
    ("{megatron_core: true}", r"^sources.yaml: source mb9999: megatron_core = True; allowed: \{value: V, cite: KEY\}$"),
    ("{megatron_core: {value: true, cite: c2}}",
     r"^sources.yaml: source mb9999: megatron_core: cite 'c2' names no citation; allowed: c1$"),
    ("[megatron_core]", r"^sources.yaml: source mb9999: not a source id mapped to its settings; allowed: "),
])
def test_a_bad_source_entry_is_refused_with_the_file_source_and_setting(entry: str, message: str) -> None:
    vt = script_module("validate_training")
    doc, _ = yamlread.load(_sources_text(mb9999=entry), "sources.yaml")
    with pytest.raises(InputError, match=message):
        vt.check_sources(doc, "sources.yaml")


def test_a_citation_no_setting_cites_and_a_stray_top_level_key_are_refused() -> None:
    vt = script_module("validate_training")
    doc, _ = yamlread.load(_sources_text(mb9999="{megatron_core: {value: true, cite: c1}}")
                           + "  c2: cited by nothing\n", "sources.yaml")
    with pytest.raises(InputError, match=r"^sources.yaml: citation 'c2' is cited by no setting"):
        vt.check_sources(doc, "sources.yaml")
    with pytest.raises(InputError, match=r"^sources.yaml: top level \['citations', 'rules', 'sources'\]; allowed: "):
        vt.check_sources({**doc, "rules": {}}, "sources.yaml")


def test_a_good_entry_gives_its_values() -> None:
    vt = script_module("validate_training")
    doc, _ = yamlread.load(_sources_text(mb9999="{megatron_core: {value: true, cite: c1}, run_year: {value: 2026, "
                                                "cite: c1}}"), "sources.yaml")
    assert vt.check_sources(doc, "sources.yaml") == {"mb9999": {"megatron_core": True, "run_year": 2026}}


def test_the_script_refuses_a_bad_sources_file_with_one_error_line(tmp_path: Path) -> None:
    """The file is read when the script starts: a bad one is one ``error:`` line and exit 2, not a traceback. The
    script is run from a copy of the repository layout (scripts/, validation/) holding a misspelled setting."""
    import subprocess
    import sys

    (tmp_path / "scripts").mkdir()
    (tmp_path / "validation").mkdir()
    (tmp_path / "scripts" / "validate_training.py").write_text(
        (ROOT / "scripts" / "validate_training.py").read_text(encoding="utf-8"), encoding="utf-8")
    text = SOURCES.read_text(encoding="utf-8").replace("    megatron_core: {value", "    megatron_cor: {value", 1)
    (tmp_path / "validation" / "sources.yaml").write_text(text, encoding="utf-8")
    run = subprocess.run([sys.executable, str(tmp_path / "scripts" / "validate_training.py"), "--json"],
                         capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": ""},
                         timeout=300)
    assert (run.returncode, run.stdout, run.stderr.count("\n")) == (2, "", 1), run.stderr
    assert run.stderr.startswith("error: validation/sources.yaml: source ")
    assert ": unknown setting 'megatron_cor'; allowed: bucket_128mi, " in run.stderr


def test_every_entry_is_a_source_of_the_case_files_and_every_setting_a_known_one() -> None:
    """A misspelled source id would hold for no row, silently: each entry names the id prefix of some row."""
    vt = script_module("validate_training")
    sources = {c["id"].split("_")[0] for c in load_yaml(CASES)}
    doc = load_yaml(SOURCES)
    assert set(doc["sources"]) <= sources, set(doc["sources"]) - sources
    assert {k for entry in doc["sources"].values() for k in entry} == set(vt.SOURCE_SETTINGS)  # none unused


def test_the_script_names_no_source() -> None:
    """No string in the script's code (docstrings and comments aside) is a source id or a prefix it tests ids with
    (the ``startswith("mb")`` of the Nemotron 3 Super rule before struct33); 'bloom' and 'mpt' are also model types
    (TIED_TYPES, NO_DROPOUT_TYPES: a row's model.type), which rows state and which may stay."""
    import ast

    tree = ast.parse((ROOT / "scripts" / "validate_training.py").read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    rows = load_yaml(CASES)
    sources = {c["id"].split("_")[0] for c in rows}
    types = {str((c.get("model") or {}).get("type")) for c in rows}
    named = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                    and id(n) not in docstrings and n.value in sources - types})
    assert named == []
    prefixes = sorted({a.value for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                       and n.func.attr == "startswith" for a in n.args if isinstance(a, ast.Constant)
                       and isinstance(a.value, str) and any(s.startswith(a.value) for s in sources)})
    assert prefixes == [], prefixes
