"""A file name holding a line break or a tab is shown unambiguously wherever a warning or an error names it: the
character as its Python escape (``\\n``, ``\\t``), not folded into a space (``a\\nb.sh`` was shown as ``a b.sh``, the
name of another file)."""
from __future__ import annotations

import json

import pytest

from scalemodel.errors import InputError
from scalemodel.specs import notices


@pytest.mark.parametrize("name,want", [("a\nb.sh", "a\\nb.sh"), ("a\tb.sh", "a\\tb.sh"), ("a\r\nb.sh", "a\\r\\nb.sh")])
def test_warning_names_the_file_with_escapes(cli, tmp_path, name: str, want: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / name
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --overlap-grad-reduce\n")
    r = cli("plan", "-m", "gpt-1.7b", "-n", "16", "--top", "1", "--json", "--strategy", str(f))
    assert r.code == 0, r.err
    warnings = json.loads(r.out)["warnings"]
    said = [w for w in warnings if "plan searches overlap" in w]
    assert said and want in said[0] and "a b.sh" not in said[0]
    assert all("\n" not in w and "\t" not in w for w in warnings)
    assert all(line.startswith("warning: ") for line in r.err.splitlines() if line)


def test_warn_keeps_a_line_break_distinct_from_a_space() -> None:
    notices.clear()
    notices.warn("x/a\nb.yaml: something")
    notices.warn("x/a b.yaml: something")
    assert notices.current() == ["x/a\\nb.yaml: something", "x/a b.yaml: something"]
    notices.clear()


def test_error_what_and_where_escape_the_name() -> None:
    e = InputError("cannot read x/a\nb.yaml\there", where="y/c\nd.yaml", allowed="a\tb")
    assert e.message() == "y/c\\nd.yaml: cannot read x/a\\nb.yaml\\there; a\\tb"


def test_error_on_the_command_line_names_the_file_with_escapes(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "bad\nname.yaml"
    f.write_text("kind: [unclosed\n")
    r = cli("predict", "-m", str(f), "-n", "8")
    assert r.code == 2
    assert r.err.count("\n") == 1 and "bad\\nname.yaml" in r.err


def test_a_multi_line_parser_message_is_still_one_readable_line(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The text of a parser's own exception (PyYAML's, several lines) is folded, not escaped: it is prose."""
    f = tmp_path / "run.toml"
    f.write_text("[parallelism\n")
    r = cli("predict", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f))
    assert r.code == 2 and r.err.count("\n") == 1 and "\\n" not in r.err.split(": ", 2)[-1]
