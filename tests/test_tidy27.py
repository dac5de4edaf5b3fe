"""tidy27: product follow-ups.

(1) A mistyped plan constraint (``tp=>8``, ``tp=<8``, ``tp==>8``, ``tp=8;pp=1``) was "constraint 'tp=>8' needs an
integer": the regex read the operator '=' and the value '>8', and the message blamed the value. Each malformed form now
gets one line that says what is wrong with the text as written and names the forms plan reads (KEY OP VALUE, the
operators, several separated by commas), exit 2, no traceback."""

from __future__ import annotations

import pytest

from scalemodel.specs.constraints import parse_constraints

PLAN = ("plan", "-m", "gpt-1.7b", "-n", "8", "--top", "1")
#: The forms every operator error names (the operators as plan --help lists them).
FORMS = "KEY OP VALUE with OP one of <=, >=, <, >, =, !="


@pytest.mark.parametrize(("text", "what"), [
    ("tp=>8", "'=>' in 'tp=>8' is not an operator (did you mean tp>=8?)"),
    ("tp=<8", "'=<' in 'tp=<8' is not an operator (did you mean tp<=8?)"),
    ("tp==>8", "'==>' in 'tp==>8' is not an operator"),
    ("tp<=>8", "'<=>' in 'tp<=>8' is not an operator"),
    ("tp>>8", "'>>' in 'tp>>8' is not an operator (did you mean tp>8?)"),
    ("tp=!8", "'=!' in 'tp=!8' is not an operator (did you mean tp!=8?)"),
    ("tp<>8", "'<>' in 'tp<>8' is not an operator (did you mean tp!=8?)"),
    ("tp!8", "'!' in 'tp!8' is not an operator (did you mean tp!=8?)"),
    ("tp= >8", "'= >' in 'tp= >8' is not an operator (did you mean tp>=8?)"),
    ("tp\u22648", "'\u2264' in 'tp\u22648' is not an operator (did you mean tp<=8?)"),
    ("memory=>60GB", "'=>' in 'memory=>60GB' is not an operator (did you mean memory>=60GB?)"),
])
def test_a_mistyped_operator_is_named_with_what_was_meant(cli, text: str, what: str) -> None:  # type: ignore[no-untyped-def]
    r = cli(*PLAN, "--constraint", text)
    assert r.code == 2 and r.out == "", (r.code, r.out)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    assert lines[0].startswith(f"error: --constraint: {what}; {FORMS}"), lines[0]
    assert "needs an integer" not in r.err


@pytest.mark.parametrize(("text", "what"), [
    ("tp=8;pp=1", "constraint 'tp=8;pp=1' holds more than one operator"),
    ("tp=8=8", "constraint 'tp=8=8' holds more than one operator"),
    ("tp<=8 pp=1", "constraint 'tp<=8 pp=1' holds more than one operator"),
    ("tp=", "constraint 'tp=' has no value"),
    ("tp 8", "constraint 'tp 8' has no operator"),
    ("tp", "constraint 'tp' has no operator"),
    ("=8", "constraint '=8' names no key"),
])
def test_other_malformed_constraints_say_what_is_wrong(cli, text: str, what: str) -> None:  # type: ignore[no-untyped-def]
    r = cli(*PLAN, "--constraint", text)
    assert r.code == 2 and r.out == "", (r.code, r.out)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    assert lines[0].startswith(f"error: --constraint: {what}; {FORMS}"), lines[0]
    assert "several separated by commas" in lines[0]


def test_the_help_names_the_operators(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", "--help")
    assert r.code == 0
    assert "OP one of <=, >=, <, >, =, !=" in " ".join(r.out.split())


@pytest.mark.parametrize(("text", "parsed"), [
    ("tp<=8", {"tp": [("<=", 8)]}),
    ("tp = 8", {"tp": [("=", 8)]}),
    ("tp==8", {"tp": [("==", 8)]}),
    ("tp!=2", {"tp": [("!=", 2)]}),
    ("tp>=2, pp <4", {"tp": [(">=", 2)], "pp": [("<", 4)]}),
    ("memory<=60 GB", {"memory": [("<=", 60e9)]}),
    ("sync=ssp:2", {"sync": [("=", "ssp:2")]}),
    ("layout=tp-cp-pp-dp", None),
])
def test_well_formed_constraints_read_as_before(text: str, parsed: dict | None) -> None:  # type: ignore[type-arg]
    got = parse_constraints([text])
    if parsed is not None:
        assert dict(got) == parsed
    else:
        assert list(got) == ["layout"] and got["layout"][0][0] == "="
